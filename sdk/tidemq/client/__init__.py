"""TideMQ package."""
