"""Consumer groups and committed offsets: the broker-side group coordinator.

Plain, clock-driven state machines (`classic` for JoinGroup/SyncGroup groups, `consumer` for KIP-848 groups with
`assignors`), the in-memory offset cache (`offsets`) and the __consumer_offsets formats (`offsets_topic`) hold all
of the rules; `coordinator` is the only asyncio code, owning waiting requests, timers, the log and loading.
"""
