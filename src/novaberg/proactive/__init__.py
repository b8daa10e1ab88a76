"""Nova writes first: reminders scheduled durably and sent when due (issue 26)."""
