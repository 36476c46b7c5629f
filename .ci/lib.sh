# Shared by .ci/run and .ci/fuzz: stage timing and the build cache's location.
#
# Stages: `stage NAME` ends the stage before it (printing its seconds and the machine's CPU use)
# and begins NAME; at exit, whether the script passed or failed, every stage's time is printed
# again as one table, so a slow stage shows in the log's last lines.

ci_started=$(date +%s)
stage_name=""
stage_started=$ci_started
stage_times=()

# The machine's busy and total CPU time so far (clock ticks, all cores): a stage's share of busy
# time says whether it was bound by the CPU (near 100%) or waited (tests on timers, downloads).
cpu_ticks() {
    awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9; exit }' /proc/stat
}
read -r stage_busy stage_total < <(cpu_ticks)

stage() {
    local now busy total cpu
    now=$(date +%s)
    read -r busy total < <(cpu_ticks)
    if [ -n "$stage_name" ]; then
        cpu=$(( total > stage_total ? 100 * (busy - stage_busy) / (total - stage_total) : 0 ))
        stage_times+=("$(printf '%6d s  cpu %3d%%  %s' $((now - stage_started)) "$cpu" "$stage_name")")
        echo "-- $stage_name: $((now - stage_started)) s, cpu $cpu%"
    fi
    stage_name="${1:-}"
    stage_started=$now
    stage_busy=$busy
    stage_total=$total
    if [ -n "$stage_name" ]; then echo "== $stage_name"; fi
}

stage_report() {
    local status=$?
    stage ""
    echo "== Stage times ($1; cpu: the machine's busy share over the stage)"
    printf '%s\n' "${stage_times[@]}"
    printf '%6d s  total (exit %d)\n' $(($(date +%s) - ci_started)) "$status"
}

# The CI cache: kept between runs on one machine, outside the clone (each CI run is a fresh
# clone). Build outputs are keyed by the compiler that made them, so a new toolchain starts a
# new directory instead of piling up beside the old one.
ci_cache="${XDG_CACHE_HOME:-$HOME/.cache}/agentd-ci"

# toolchain_key [+TOOLCHAIN]: a short name for the compiler's exact build.
toolchain_key() {
    rustc ${1:+"$1"} -vV | sha256sum | cut -c1-12
}

# prepare_target_dir DIR: drop from the build output directory DIR what an earlier run left that
# this one cannot use. Every cached target directory goes through it before a build.
#
# The workspace's own crates are always rebuilt, so their outputs of earlier runs go first:
# they would pile up (the test binaries are the bulk), and they are not safe to keep. cargo
# names a workspace crate's outputs by its path relative to the workspace, so another clone's
# outputs carry the same names, and cargo judges them by modification times: a tree whose files
# are older than those outputs (a checkout made before the last run) would be taken as built.
# Dependencies are what the cache is for and stay. A directory over CI_CACHE_MAX_GIB (default 40) is emptied whole: the bound
# on what stale dependency versions can add up to.
prepare_target_dir() {
    local dir=$1 max_gib=${CI_CACHE_MAX_GIB:-40}
    mkdir -p "$dir"
    if [ "$(du -s --block-size=1G "$dir" | cut -f1)" -gt "$max_gib" ]; then
        echo "build cache $dir is over $max_gib GiB: emptied"
        rm -rf "$dir"
        mkdir -p "$dir"
    fi
    # The workspace's crates and targets, as their outputs are named (dashes as underscores).
    local members='agentcore|agentd|agentctl|examples|embed|support|api|agentd_under_test|agentctl_under_test|mcp_test_server|agentd_fuzz|stripe_signature|stripe_event|request_body|discord_interaction'
    find "$dir" -mindepth 3 -maxdepth 4 \
        \( -path '*/deps/*' -o -path '*/.fingerprint/*' -o -path '*/build/*' -o -path '*/examples/*' -o -path '*/incremental/*' \) \
        -regextype posix-extended -regex ".*/(lib)?($members)-[0-9a-f]{16}([.-].*)?" \
        -prune -exec rm -rf {} +
}
