module github.com/worklease/worklease/console

go 1.26

require (
	github.com/chromedp/cdproto v0.159.0
	github.com/chromedp/chromedp v0.23.0
	github.com/jackc/pgx/v5 v5.12.0
	github.com/worklease/worklease v0.0.0
	github.com/worklease/worklease/pg v0.0.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)

// The core module and the PostgreSQL backend, in this repository.
replace (
	github.com/worklease/worklease => ../
	github.com/worklease/worklease/pg => ../pg
)
