"""The broker's replication role layer (docs/replication.md, "Broker roles and failover"):
the replica's live lease, its group's state from the controller, and the role changes it
drives in the store, the HA stream and the name-server registration."""
