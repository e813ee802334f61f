"""GPU memory kept by monitoring platforms: Prometheus exporters, Grafana, experiment trackers, framework metric files."""
