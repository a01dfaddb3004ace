package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// telemetryHelp is the part of the usage text about OpenTelemetry.
const telemetryHelp = `
Traces and metrics (OpenTelemetry) are exported when the environment asks for them:
  OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER   otlp, console (to stderr) or none; a comma-separated list
                      (default: otlp if an OTLP endpoint is set, otherwise none)
  OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT, ..._HEADERS, ..._TIMEOUT,
  ..._COMPRESSION, ..._CERTIFICATE: as the OTLP exporters define them; OTEL_EXPORTER_OTLP_PROTOCOL must be
  http/protobuf (the default). OTEL_SERVICE_NAME (default wasmbox), OTEL_RESOURCE_ATTRIBUTES,
  OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_METRIC_EXPORT_INTERVAL, OTEL_SDK_DISABLED=true; TRACEPARENT
  (and TRACESTATE) make the run a child of that span.
`

// shutdownTimeout bounds the flush of what is still buffered when the command ends.
const shutdownTimeout = 5 * time.Second

// withTelemetry installs the OpenTelemetry SDK as the global providers when the OTEL_* environment asks for an
// exporter, runs fn (with the TRACEPARENT span, if any, in its context), and flushes and shuts the SDK down
// before returning fn's exit code. Without any OTEL_* setting nothing is installed and nothing is exported.
// An invalid setting is a usage error; a failed export is reported on stderr and does not change the code.
func withTelemetry(ctx context.Context, stderr io.Writer, fn func(context.Context) int) int {
	shutdown, err := startTelemetry(ctx, os.Getenv, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "wasmbox: telemetry: %v\n", err)
		return exitUsage
	}
	if shutdown == nil {
		return fn(ctx)
	}
	code := fn(parentFromEnv(ctx, os.Getenv))
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "wasmbox: telemetry: exporting at exit: %v\n", err)
	}
	return code
}

// exporters parses an OTEL_*_EXPORTER value: otlp, console, none, or a comma-separated list of them. Unset
// means otlp when an OTLP endpoint is configured for the signal, and none otherwise.
func exporters(getenv func(string) string, name, signal string) (otlp, console bool, err error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != "", false, nil
	}
	for _, e := range strings.Split(v, ",") {
		switch strings.TrimSpace(e) {
		case "otlp":
			otlp = true
		case "console":
			console = true
		case "none":
		default:
			return false, false, fmt.Errorf("%s: unknown exporter %q (this build has otlp, console and none)", name, e)
		}
	}
	return otlp, console, nil
}

// checkProtocol refuses an OTLP protocol other than http/protobuf.
func checkProtocol(getenv func(string) string, signal string) error {
	for _, name := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := strings.TrimSpace(getenv(name)); v {
		case "":
			continue
		case "http/protobuf":
			return nil
		default:
			return fmt.Errorf("%s=%s is not supported: wasmbox exports OTLP over http/protobuf only (use an OpenTelemetry Collector to forward to gRPC or JSON)", name, v)
		}
	}
	return nil
}

// startTelemetry installs the providers the environment asks for and returns their shutdown, or nil if it
// asks for none.
func startTelemetry(ctx context.Context, getenv func(string) string, stderr io.Writer) (func(context.Context) error, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	traceOTLP, traceConsole, err := exporters(getenv, "OTEL_TRACES_EXPORTER", "TRACES")
	if err != nil {
		return nil, err
	}
	metricOTLP, metricConsole, err := exporters(getenv, "OTEL_METRICS_EXPORTER", "METRICS")
	if err != nil {
		return nil, err
	}
	if !traceOTLP && !traceConsole && !metricOTLP && !metricConsole {
		return nil, nil
	}
	if traceOTLP {
		if err := checkProtocol(getenv, "TRACES"); err != nil {
			return nil, err
		}
	}
	if metricOTLP {
		if err := checkProtocol(getenv, "METRICS"); err != nil {
			return nil, err
		}
	}
	// service.name defaults to wasmbox; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "wasmbox")),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		fmt.Fprintf(stderr, "wasmbox: telemetry: %v\n", err)
	}))
	var shutdowns []func(context.Context) error
	if traceOTLP || traceConsole {
		opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
		if traceOTLP {
			exp, err := otlptracehttp.New(ctx) // endpoint, headers, timeout, TLS from OTEL_EXPORTER_OTLP_*
			if err != nil {
				return nil, fmt.Errorf("OTLP trace exporter: %w", err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
		if traceConsole {
			exp, err := stdouttrace.New(stdouttrace.WithWriter(stderr))
			if err != nil {
				return nil, fmt.Errorf("console trace exporter: %w", err)
			}
			opts = append(opts, sdktrace.WithSyncer(exp))
		}
		tp := sdktrace.NewTracerProvider(opts...)
		otel.SetTracerProvider(tp)
		shutdowns = append(shutdowns, tp.Shutdown)
	}
	if metricOTLP || metricConsole {
		opts := []sdkmetric.Option{sdkmetric.WithResource(res)}
		if metricOTLP {
			exp, err := otlpmetrichttp.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("OTLP metric exporter: %w", err)
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		}
		if metricConsole {
			exp, err := stdoutmetric.New(stdoutmetric.WithWriter(stderr))
			if err != nil {
				return nil, fmt.Errorf("console metric exporter: %w", err)
			}
			opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
		}
		mp := sdkmetric.NewMeterProvider(opts...)
		otel.SetMeterProvider(mp)
		shutdowns = append(shutdowns, mp.Shutdown)
	}
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return func(ctx context.Context) error {
		var errs []error
		for _, s := range shutdowns {
			errs = append(errs, s(ctx))
		}
		return errors.Join(errs...)
	}, nil
}

// parentFromEnv returns ctx with the span named by TRACEPARENT (and TRACESTATE), if they are set and valid, as
// the parent of the command's spans.
func parentFromEnv(ctx context.Context, getenv func(string) string) context.Context {
	tp := getenv("TRACEPARENT")
	if tp == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": tp}
	if ts := getenv("TRACESTATE"); ts != "" {
		carrier["tracestate"] = ts
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}
