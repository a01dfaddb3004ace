package sci_test

import (
	"context"
	"fmt"
	"log"

	_ "github.com/wasmbox/wasmbox/sci" // registers the "sci" runtime
	"github.com/wasmbox/wasmbox/wasmbox"
)

// A sandbox on the sci runtime starts with numpy and pandas already imported.
func Example() {
	ctx := context.Background()
	sb, err := wasmbox.New(ctx, wasmbox.Config{Runtime: "sci"})
	if err != nil {
		log.Fatal(err)
	}
	defer sb.Close(ctx)
	res, err := sb.Run(ctx, `
import numpy as np, pandas as pd
df = pd.DataFrame({"city": ["Paris", "Lisbon", "Paris"], "sales": [3, 5, 4]})
print(df.groupby("city").sales.sum().to_dict(), np.linalg.solve([[2, 0], [0, 4]], [2, 8]))
`)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
	// Output: {'Lisbon': 5, 'Paris': 7} [1. 2.]
}
