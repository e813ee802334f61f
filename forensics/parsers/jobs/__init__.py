"""Readers of what a scheduler, a container runtime or a job's own stderr says ended a job."""
