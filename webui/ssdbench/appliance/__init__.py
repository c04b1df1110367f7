"""The appliance around the engine: the login PIN, the console status screen, and unattended mode."""
