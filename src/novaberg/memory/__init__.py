"""What Nova remembers about a user, and the user's control over it."""
