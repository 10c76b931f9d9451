"""How an installation is doing: the health report, workers' heartbeats, compiled loops."""
