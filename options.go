package worklease

import (
	"fmt"
	"time"
)

// Clock is the source of time a Manager reads. Any value with a Now method
// works; tests pass a fake clock to control time.
type Clock interface {
	Now() time.Time
}

// An Option configures a Manager. Options are applied in order by New, which
// validates the result.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// DefaultMaxRetries is the number of retries a Manager allows per offset
// unless WithMaxRetries says otherwise.
const DefaultMaxRetries = 3

// DefaultShards is the number of shards the domain map is split into unless
// WithShards says otherwise.
const DefaultShards = 64

// maxShards bounds WithShards; more shards than this only waste memory.
const maxShards = 1 << 16

type config struct {
	maxRetries int
	shards     int
	clock      Clock // nil means time.Now, called directly
}

func defaultConfig() config {
	return config{maxRetries: DefaultMaxRetries, shards: DefaultShards}
}

func (c *config) validate() error {
	if c.maxRetries < 0 {
		return fmt.Errorf("%w: WithMaxRetries(%d): must be zero or more", ErrInvalidConfig, c.maxRetries)
	}
	if c.shards < 1 || c.shards > maxShards {
		return fmt.Errorf("%w: WithShards(%d): must be between 1 and %d", ErrInvalidConfig, c.shards, maxShards)
	}
	return nil
}

// WithMaxRetries sets how many times Fail may schedule a retry of one offset
// before the next Fail gives up on it: with n retries an offset gets n+1
// attempts, and the (n+1)th Fail moves it to the failed set. Zero makes the
// first Fail final. The default is DefaultMaxRetries; a negative n makes New
// return an error.
func WithMaxRetries(n int) Option {
	return optionFunc(func(c *config) { c.maxRetries = n })
}

// WithClock makes the Manager read time from c instead of the system clock.
// The Manager calls c.Now outside its locks, so c may take locks of its own.
// A nil c means the system clock, the default.
func WithClock(c Clock) Option {
	return optionFunc(func(cfg *config) { cfg.clock = c })
}

// WithShards sets how many shards the Manager splits its map of domains into;
// each shard has its own lock, so more shards mean less contention when many
// goroutines look up many domains. n is rounded up to a power of two. It must
// be between 1 and 65536; the default is DefaultShards.
func WithShards(n int) Option {
	return optionFunc(func(c *config) { c.shards = n })
}
