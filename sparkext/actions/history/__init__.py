"""Table state by event time: snapshot_as_of_event_time.

Floor: actions (the work, typed results).
"""
