"""Reviewers' accounts."""
