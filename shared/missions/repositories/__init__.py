"""Repositories a user may read: allowed local roots, registered repositories, their snapshots."""
