"""The pure episode loop: simulator, director, subject turn, stop rules."""
