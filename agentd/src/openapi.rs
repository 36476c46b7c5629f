//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations as the
//! route table registers them (`routes::document`), so a route cannot exist without its
//! description.
//!
//! What every operation shares is added here once: the error envelope as the `4XX` and `5XX`
//! responses, and the bearer scheme the authenticated operations name.

use utoipa::Modify;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{OpenApi, RefOr, ResponseBuilder};

use crate::error::{ErrorBody, ErrorDetail};

/// The name of the bearer scheme that authenticated operations list.
pub const BEARER: &str = "bearer";

/// The document's frame: title, version, and the conventions every operation shares.
#[derive(Debug, utoipa::OpenApi)]
#[openapi(
    info(
        title = "agentd",
        description = "Run autonomous AI agents: accounts, agents and their backlogs, Discord \
                       connections, onboarding templates and billing. Errors share one envelope; \
                       authenticated operations take `Authorization: Bearer <access_token>` from \
                       `POST /auth/register` or `POST /auth/login`."
    ),
    components(schemas(ErrorBody, ErrorDetail)),
    modifiers(&Conventions)
)]
pub struct Frame;

struct Conventions;

impl Modify for Conventions {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("JWT").build(),
            ),
        );
    }
}

/// Adds the error responses to every operation (run after all routes are in, since
/// `Modify` sees only the frame's own paths).
pub fn add_error_responses(openapi: &mut OpenApi) {
    let error = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                            "ErrorBody",
                        ))))
                        .build(),
                )
                .build(),
        )
    };
    for item in openapi.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
            &mut item.head,
            &mut item.options,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            responses
                .entry("4XX".into())
                .or_insert_with(|| error("The request was refused; `error.code` says why."));
            responses
                .entry("5XX".into())
                .or_insert_with(|| error("The service or one it depends on failed."));
        }
    }
}
