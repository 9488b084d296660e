package workleasekafka

// Crash makes c commit nothing from now on, as a member that died would
// not: once it returns, no commit of c's is under way. Close c next (with
// a context that is done already, for handlers cancelled at once), to have
// it leave the group as a crash would, minus the session timeout.
func Crash(c *Consumer) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.crashed.Store(true)
}
