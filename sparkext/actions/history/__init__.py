"""Table state by event time: snapshot_as_of_event_time."""
