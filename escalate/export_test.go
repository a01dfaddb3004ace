package escalate

import "testing"

// EngineHostForTest returns the first configured engine (skipping, or failing when CI=true, without one), for the
// tests of package escalate_test.
func EngineHostForTest(t *testing.T) string {
	t.Helper()
	hosts := engineHosts()
	if len(hosts) == 0 {
		missingEngine(t, "no engine configured (WASMBOX_DOCKER_HOSTS, WASMBOX_DOCKER_HOST, DOCKER_HOST)")
	}
	return hosts[0]
}

// ImageForTest is the image of the engine tests.
func ImageForTest() string { return testImage() }
