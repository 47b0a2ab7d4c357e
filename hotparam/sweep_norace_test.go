//go:build !race

package hotparam_test

// carryMaxCount is the largest old and new count of the edited-rule phase
// sweep (TestEditedBucketRuleCarriesAtEveryPhase).
const carryMaxCount = 12
