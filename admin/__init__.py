"""The reviewers' web app and JSON API."""
