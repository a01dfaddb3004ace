package wasmbox_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/wasmbox/wasmbox/governance"
	"github.com/wasmbox/wasmbox/hostfuncs"
	"github.com/wasmbox/wasmbox/wasmbox"
)

// Spans of a run and of its tool calls, recorded by the OpenTelemetry SDK. A program would install its SDK
// globally (otel.SetTracerProvider) and leave Config.TracerProvider nil; here the test exporter keeps them.
func ExampleConfig_tracing() {
	ctx := context.Background()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(ctx)

	getOrder := hostfuncs.Func("get_order", "Get one order.", func(ctx context.Context, a struct {
		OrderID string `json:"order_id"`
	}) (map[string]any, error) {
		return map[string]any{"id": a.OrderID}, nil
	})
	getOrder.Effect = governance.ReadOnly
	sb, err := wasmbox.New(ctx, wasmbox.Config{TracerProvider: tp, Tools: hostfuncs.NewRegistry().MustRegister(getOrder)})
	if err != nil {
		panic(err)
	}
	defer sb.Close(ctx)

	ctx, span := tp.Tracer("shop").Start(ctx, "handle request")
	_, err = sb.Run(ctx, "import tools\nfor i in range(3):\n    tools.get_order(str(i))")
	span.End()
	if err != nil {
		panic(err)
	}
	names := map[string]string{}
	for _, s := range exp.GetSpans() {
		names[s.SpanContext.SpanID().String()] = s.Name
	}
	for _, s := range exp.GetSpans() { // in the order they ended
		fmt.Printf("%s <- %s\n", s.Name, names[s.Parent.SpanID().String()])
	}
	// Output:
	// execute_tool get_order <- wasmbox.run
	// execute_tool get_order <- wasmbox.run
	// execute_tool get_order <- wasmbox.run
	// wasmbox.run <- handle request
	// handle request <-
}
