package pg

import "strings"

// GrantOverLeases breaks m, for the linearizability test to catch: its
// TryAcquire grants on a domain whose lease is held, as a grant that did
// not check the row's lease would.
func GrantOverLeases(m *Manager) {
	m.fast.acquire = strings.Replace(m.fast.acquire, "AND x.lease_off IS NULL ", "", 1)
	m.fast.acquireLong = strings.Replace(m.fast.acquireLong, "AND x.lease_off IS NULL ", "", 1)
}

// WaitOnNotifications makes m's WaitClaim wait a whole poll after each
// claim that found nothing, for the tests that only a notification may end
// that wait.
func WaitOnNotifications(m *Manager) { m.recheck = 0 }
