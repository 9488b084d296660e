package workleasekafka_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease/workleasekafka"
)

// A consumer in a group, on an in-process cluster: each account's records
// are handled in the order they were produced, while accounts run in
// parallel.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "payments"))
	if err != nil {
		panic(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("payments"))
	if err != nil {
		panic(err)
	}
	defer producer.Close()
	ctx := context.Background()
	for _, p := range [][2]string{
		{"alice", "deposit 10"}, {"bob", "deposit 3"}, {"alice", "withdraw 5"},
		{"carol", "deposit 8"}, {"bob", "withdraw 1"}, {"alice", "deposit 7"},
	} {
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(p[0]), Value: []byte(p[1])}).FirstErr(); err != nil {
			panic(err)
		}
	}

	var (
		mu      sync.Mutex
		history = map[string][]string{}
		handled sync.WaitGroup // for the example's sake: a service runs on
	)
	handled.Add(6)
	c, err := workleasekafka.New([]kgo.Opt{
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup("ledger"),
		kgo.ConsumeTopics("payments"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, func(ctx context.Context, r *kgo.Record) error {
		defer handled.Done()
		mu.Lock()
		defer mu.Unlock()
		history[string(r.Key)] = append(history[string(r.Key)], string(r.Value))
		return nil // an error would retry the record, before the account's next
	}, workleasekafka.WithHandlers(8))
	if err != nil {
		panic(err)
	}
	done := make(chan error)
	go func() { done <- c.Run(ctx) }()
	handled.Wait()
	if err := c.Close(ctx); err != nil { // commits, and leaves the group
		panic(err)
	}
	if err := <-done; err != nil {
		panic(err)
	}

	for _, account := range slices.Sorted(maps.Keys(history)) {
		fmt.Println(account, history[account])
	}
	// Output:
	// alice [deposit 10 withdraw 5 deposit 7]
	// bob [deposit 3 withdraw 1]
	// carol [deposit 8]
}
