"""Session and checkpoint stores."""
