"""Tracelake as a shared service: the HTTP API (FastAPI), its OpenLineage (Marquez-compatible)
ingest, and the web UI, all thin over `tracelake.app.service.Tracelake`."""
