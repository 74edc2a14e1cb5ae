"""Contracts between the app's parts: plain, standard-library values both sides import."""
