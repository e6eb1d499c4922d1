// Package rollout splits a fleet into a canary and batches and decides when a rollout stops.
package rollout
