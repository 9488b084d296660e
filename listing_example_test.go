package worklease_test

import (
	"fmt"

	"github.com/worklease/worklease"
)

// ListDomains pages through the domains a query matches: here those with
// dead letters, two at a time, following Next until it is "".
func ExampleManager_ListDomains() {
	m, _ := worklease.New()
	defer m.Close()
	for _, d := range []string{"tenant-1", "tenant-2", "tenant-3", "tenant-4"} {
		m.TryAcquire(d, 1)
	}
	m.Kill("tenant-2", 7, "poison")
	m.Kill("tenant-4", 9, "poison")

	q := worklease.DomainQuery{State: worklease.DomainDeadLettered, Limit: 2}
	n := 0
	for {
		page, err := m.ListDomains(q)
		if err != nil {
			panic(err)
		}
		for _, d := range page.Domains {
			n++
			fmt.Println(d.Domain != "", d.Leased, d.DeadLetters, d.State())
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	fmt.Println(n, "domains with dead letters")
	// Output:
	// true true 1 leased|dead-lettered
	// true true 1 leased|dead-lettered
	// 2 domains with dead letters
}

// ListDeadLetters lists one domain's dead letters by offset, with the
// payloads they were enqueued with.
func ExampleManager_ListDeadLetters() {
	m, _ := worklease.New(worklease.WithMaxRetries(0))
	defer m.Close()
	m.Enqueue("tenant-1", 1, []byte(`{"amount":12}`))
	claims, _ := m.Claim(1)
	m.Retry("tenant-1", claims[0].Token, fmt.Errorf("card declined"), 0)

	page, _ := m.ListDeadLetters(worklease.DeadLetterQuery{Domain: "tenant-1", Payloads: true})
	for _, dl := range page.DeadLetters {
		fmt.Printf("%s/%d: %v, payload %s\n", dl.Domain, dl.Offset, dl.Cause, dl.Payload)
	}
	// Output:
	// tenant-1/1: card declined, payload {"amount":12}
}
