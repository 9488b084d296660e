package workleaseprom

import "time"

// SetNow makes c read its clock from now.
func SetNow(c *Collector, now func() time.Time) { c.now = now }
