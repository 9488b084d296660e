module github.com/worklease/worklease/examples/kafka

go 1.26.0

// The core module at the root of this repository, and the Kafka consumer's.
replace (
	github.com/worklease/worklease => ../..
	github.com/worklease/worklease/workleasekafka => ../../workleasekafka
)

require (
	github.com/stretchr/testify v1.12.1
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kadm v1.20.0
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/worklease/worklease v0.0.0
	github.com/worklease/worklease/workleasekafka v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kmsg v1.15.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
