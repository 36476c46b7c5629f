SELECT number_events(NULL, 100);
