package workleasekafka

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/worklease/worklease"
	"github.com/worklease/worklease/worker"
)

// An Option configures a Consumer. New applies options in order and
// validates the result.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// The defaults of a Consumer's settings.
const (
	// DefaultHandlers is how many handlers a Consumer runs at once unless
	// WithHandlers says otherwise.
	DefaultHandlers = 64
	// DefaultMaxUnfinished is how many records a Consumer may hand its
	// handlers unfinished, and how many may wait polled ahead of them,
	// unless WithMaxUnfinished says otherwise. A key's records handed over
	// while its last job waits go to the Pool as one job, so the more
	// records the handlers may have, the fewer jobs they cost: with a
	// handler that does little, the Pool's cost of a job weighs more than
	// the handler's, and a few thousand keys at work share this many
	// records a few dozen a key.
	DefaultMaxUnfinished = 40_000
	// DefaultCommitInterval is how often a Consumer commits unless
	// WithCommitInterval says otherwise.
	DefaultCommitInterval = time.Second
	// DefaultFetchMaxWait is the kgo.FetchMaxWait a Consumer's client has
	// unless its options say otherwise: how long a broker may hold a fetch
	// for records to arrive. A partition whose fetching was paused for
	// back-pressure (see WithMaxUnfinished) is fetched again only with the
	// broker's next fetch, so kgo's default of 5s would hold it that long
	// whenever the other partitions are caught up.
	DefaultFetchMaxWait = 100 * time.Millisecond
	// DefaultRevokeTimeout is how long a Consumer lets the handlers of a
	// revoked partition run unless WithRevokeTimeout says otherwise.
	DefaultRevokeTimeout = 10 * time.Second
)

// maxMaxRetries bounds WithMaxRetries: more retries than this would only
// hide a record that never succeeds.
const maxMaxRetries = 1_000_000

// config is what a Consumer's options make.
type config struct {
	handlers       int
	keyFunc        func(*kgo.Record) string // nil: the record's key
	maxRetries     int
	backoff        worklease.Backoff
	deadLetter     string // topic; "" for none
	park           bool
	commitEvery    time.Duration
	revokeTimeout  time.Duration
	maxUnfinished  int
	commitMetadata bool
	errorFunc      func(error)
	commitCheck    func(topic string, partition int32, offset int64) error
	middleware     []func(worker.Handler) worker.Handler
}

func newConfig(opts []Option) (config, error) {
	c := config{
		handlers:      DefaultHandlers,
		maxRetries:    worklease.DefaultMaxRetries,
		commitEvery:   DefaultCommitInterval,
		revokeTimeout: DefaultRevokeTimeout,
		maxUnfinished: DefaultMaxUnfinished,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	invalid := func(format string, args ...any) (config, error) {
		return config{}, fmt.Errorf("%w: workleasekafka: "+format, append([]any{worklease.ErrInvalidConfig}, args...)...)
	}
	switch {
	case c.handlers < 1:
		return invalid("WithHandlers(%d): must be 1 or more", c.handlers)
	case c.maxRetries < 0 || c.maxRetries > maxMaxRetries:
		return invalid("WithMaxRetries(%d): must be between 0 and %d", c.maxRetries, maxMaxRetries)
	case c.commitEvery <= 0:
		return invalid("WithCommitInterval(%v): must be positive", c.commitEvery)
	case c.revokeTimeout < 0:
		return invalid("WithRevokeTimeout(%v): must be zero or more", c.revokeTimeout)
	case c.maxUnfinished < 1:
		return invalid("WithMaxUnfinished(%d): must be 1 or more", c.maxUnfinished)
	}
	if c.deadLetter != "" {
		if err := checkTopic(c.deadLetter); err != nil {
			return invalid("WithDeadLetterTopic(%q): %v", c.deadLetter, err)
		}
	}
	for i, mw := range c.middleware {
		if mw == nil {
			return invalid("WithMiddleware: middleware %d is nil", i)
		}
	}
	return c, nil
}

// checkTopic reports whether name is a legal Kafka topic name: 1 to 249
// characters of ASCII letters, digits, '.', '_' and '-', and neither "."
// nor "..".
func checkTopic(name string) error {
	if name == "" || len(name) > 249 {
		return fmt.Errorf("a topic name has 1 to 249 characters")
	}
	if name == "." || name == ".." {
		return fmt.Errorf("a topic cannot be named %q", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("a topic name holds only ASCII letters, digits, '.', '_' and '-'")
		}
	}
	return nil
}

// WithHandlers sets how many handlers the Consumer runs at once, across
// all its partitions: n must be 1 or more. More handlers than partitions
// is the point: records of different keys of one partition run at once.
// The default is DefaultHandlers.
func WithHandlers(n int) Option { return optionFunc(func(c *config) { c.handlers = n }) }

// WithKeyFunc makes f give each record's key: records of one key run one
// at a time, in offset order. By default the key is the record's Key, and
// records without one share the empty key, so that they run in partition
// order; a key function that returns a key unique to each record (its
// offset, say) lets them run in no order at all. Keys are taken within a
// partition: records of one key in two partitions are two keys, as Kafka
// orders records only within a partition. f is called from the polling
// goroutine, once per record, and must not keep the record. A nil f means
// the default.
func WithKeyFunc(f func(r *kgo.Record) string) Option {
	return optionFunc(func(c *config) { c.keyFunc = f })
}

// WithMaxRetries sets how many times a record is tried again after its
// handler failed (returned an error or panicked) before the Consumer gives
// up on it: with n retries a record gets n+1 attempts. What giving up
// means is WithDeadLetterTopic's and WithParkOnFailure's. n must be between
// 0 and 1,000,000; the default is worklease.DefaultMaxRetries.
func WithMaxRetries(n int) Option { return optionFunc(func(c *config) { c.maxRetries = n }) }

// WithBackoff sets the delays between a failed attempt and the next, as
// worker.WithBackoff does: no handler waits them out, and nothing of the
// record's key overtakes it. The delay grows with the attempts of the
// Pool's job, which may hold several of a key's records (see the package
// documentation), so a record may wait longer than its own attempts alone
// would make it. The default is the zero Backoff: 200ms, then doubling up
// to a minute, with 10% jitter (see worklease.Backoff).
func WithBackoff(b worklease.Backoff) Option { return optionFunc(func(c *config) { c.backoff = b }) }

// WithDeadLetterTopic makes the Consumer produce each record it gives up on
// to topic, which must exist (or the cluster create it): a copy of the
// record, key, value and headers, with the headers HeaderCause,
// HeaderAttempts, HeaderTopic, HeaderPartition and HeaderOffset added. The
// record counts as finished, and its key carries on, only once the copy is
// acknowledged; until then the Consumer produces it again, with the
// Consumer's backoff between tries. Without a dead-letter topic (the
// default) a record given up on is dropped, after its error is reported
// to WithErrorFunc.
func WithDeadLetterTopic(topic string) Option {
	return optionFunc(func(c *config) { c.deadLetter = topic })
}

// WithParkOnFailure makes a record that fails its last attempt park its
// key instead: the record stays unfinished, so that its partition is not
// committed past it, and nothing more of its key runs until an operator
// calls Resume (which runs the record again, with its attempts counted
// afresh) or Skip (which gives up on it, to the dead-letter topic if there
// is one). The partition's other keys carry on, up to WithMaxUnfinished
// records past the parked one. A parked key is this Consumer's: if its
// partition moves to another member, the new owner starts at the parked
// record, with a fresh count of attempts.
func WithParkOnFailure() Option { return optionFunc(func(c *config) { c.park = true }) }

// WithCommitInterval sets how often the Consumer commits each partition
// it owns, below the partition's lowest unfinished record. It also
// commits when a partition is revoked and when it closes. The default is
// DefaultCommitInterval.
func WithCommitInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.commitEvery = d })
}

// WithRevokeTimeout sets how long the Consumer lets the handlers of a
// revoked partition run before it cancels them (with ErrRevoked as their
// context's cause) and commits the partition without their records. It
// should be well within the group's rebalance timeout (kgo.RebalanceTimeout,
// 60s by default), which bounds the whole revocation. Zero cancels them at
// once. The default is DefaultRevokeTimeout.
func WithRevokeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.revokeTimeout = d })
}

// WithMaxUnfinished bounds how many records the Consumer hands its
// handlers unfinished, over all its partitions: at n, it hands them no
// more until half of them are done. It also bounds the records polled
// ahead of the handlers: the Consumer polls whenever fewer than n of them
// wait, and takes all its client has fetched, so that the client fetches
// again while the handlers work; so fewer than n records and one fetch
// from each broker (see kgo.FetchMaxBytes and kgo.FetchMaxPartitionBytes)
// wait, and the client holds one more fetch. So that a slow partition
// leaves room for the others, a partition that holds n/2 of the handlers'
// records when handing them over has been held back for half a second,
// while the Consumer owns others, is paused (kgo's PauseFetchPartitions),
// and its records, those polled ahead of it too, are set aside from the
// bounds, until it holds n/4. Records are handed over 1,000 at least (or
// n if fewer), so the Consumer, or a paused partition, may go past its
// bound by that many. n must be 1 or more; the default is
// DefaultMaxUnfinished.
func WithMaxUnfinished(n int) Option { return optionFunc(func(c *config) { c.maxUnfinished = n }) }

// WithCommitMetadata makes each commit record, in the commit's metadata,
// which records above the committed offset are finished already, as
// Confluent's Parallel Consumer does; a Consumer that is assigned the
// partition then skips them, rather than run them again. The list is cut to
// what fits in MaxMetadataLen bytes, lowest offsets first: the records it
// leaves out are run again. The metadata is text of this package's own
// format; metadata of another format is ignored. Off by default.
func WithCommitMetadata() Option { return optionFunc(func(c *config) { c.commitMetadata = true }) }

// WithErrorFunc makes the Consumer call f with each error it carries on
// after: a failed commit, a fetch error, a dead letter that could not be
// produced yet, a record given up on without a dead-letter topic, and the
// errors of the worker Pool it runs on (see worker.WithErrorFunc). f is
// called from the Consumer's goroutines and must be safe for concurrent
// use.
func WithErrorFunc(f func(error)) Option { return optionFunc(func(c *config) { c.errorFunc = f }) }

// WithCommitCheck makes the Consumer call f with each partition's offset
// before it commits it, after its own check: an error from f keeps the
// partition out of that commit (the next commit tries again), and is
// reported to WithErrorFunc, wrapped in an error matching ErrCommitRefused.
// f is called from the goroutine that commits, at most one call at a time,
// and should return quickly: a revocation waits for its commit.
func WithCommitCheck(f func(topic string, partition int32, offset int64) error) Option {
	return optionFunc(func(c *config) { c.commitCheck = f })
}

// WithMiddleware wraps the Consumer's handling of each attempt in mw, such
// as tracing (see the workleaseotel module): mw gets the attempt as a
// worker.Job (its Domain names the partition and the key, its Offset is the
// record's offset, its Attempt counts from 1 since the record was fetched or
// resumed, and its Payload is nil) and a context that RecordFromContext
// reads the record from. An error mw returns counts as the handler's. Given
// more than once, the first is the outermost.
func WithMiddleware(mw func(worker.Handler) worker.Handler) Option {
	return optionFunc(func(c *config) { c.middleware = append(c.middleware, mw) })
}
