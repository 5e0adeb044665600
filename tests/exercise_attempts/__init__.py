"""Learner attempts at the course's 25 checked exercises: right_* and wrong_* per module (see README.md)."""
