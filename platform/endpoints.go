package platform

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/nexo-temporal/nexo/activities"
	"github.com/nexo-temporal/nexo/api"
	"github.com/nexo-temporal/nexo/config"
)

// modelEndpoints builds the clients of llm.endpoints (the default endpoint is deps.LLM)
// and the task queue of each endpoint with a request rate limit, the default one
// included.
func modelEndpoints(cfg config.Config, getenv func(string) string) (map[string]*activities.LLM, map[string]string) {
	clients := map[string]*activities.LLM{}
	queues := map[string]string{}
	for name, e := range cfg.Endpoints() {
		if name != api.DefaultEndpoint {
			clients[name] = activities.NewLLM(activities.LLMConfig{BaseURL: e.BaseURL, Model: e.Model,
				APIKey: e.APIKey(getenv), Timeout: e.Timeout, RetryFor: cfg.LLM.RetryFor, Prices: e.Prices,
				TokensPerMinute: e.Limits.TokensPerMinute})
		}
		if e.DispatchRate() > 0 {
			queues[name] = api.ModelTaskQueue(cfg.Temporal.TaskQueue, name)
		}
	}
	return clients, queues
}

// startModelWorkers starts, for every endpoint, a worker on the endpoint's model task
// queue that runs only the model activities. For an endpoint with
// limits.requests_per_minute the queue's dispatch rate (TaskQueueActivitiesPerSecond) is
// the endpoint's rate: the Temporal server enforces it for the whole task queue, across
// every worker that polls it, so it is the fleet's rate, not this worker's, and calls over
// it wait in the queue. Endpoints without a limit are polled too, unpaced: a run resolved
// while its endpoint had a limit keeps sending its calls there after the limit is removed,
// and they must still be served. The returned func stops the workers.
func startModelWorkers(tc client.Client, cfg config.Config, acts *activities.Activities, identity string, stdout io.Writer) (func(), error) {
	var started []worker.Worker
	stop := func() {
		for _, w := range started {
			w.Stop()
		}
	}
	endpoints := cfg.Endpoints()
	for _, name := range slices.Sorted(maps.Keys(endpoints)) {
		e := endpoints[name]
		rate := e.DispatchRate()
		queue := api.ModelTaskQueue(cfg.Temporal.TaskQueue, name)
		w := worker.New(tc, queue, worker.Options{
			Identity:                     identity,
			WorkerStopTimeout:            10 * time.Second,
			TaskQueueActivitiesPerSecond: rate,
			MaxHeartbeatThrottleInterval: activities.HeartbeatThrottle,
			Interceptors:                 keepAlive(), // every attempt heartbeats while it runs
			// Nothing but model activities is ever scheduled here.
			DisableWorkflowWorker: true,
		})
		acts.Model.RegisterCalls(w)
		if err := w.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start the model worker of endpoint %s on task queue %s: %w", name, queue, err)
		}
		started = append(started, w)
		if tpm := e.Limits.TokensPerMinute; tpm > 0 {
			fmt.Fprintf(stdout, "Model endpoint %s: at most %d tokens/minute for the whole fleet (booked at %d a sliding minute with workflow %s)\n",
				name, tpm, int(float64(tpm)*config.RateMargin), api.TokenLimiterID(cfg.Temporal.TaskQueue, name))
		}
		if rate <= 0 {
			continue
		}
		fmt.Fprintf(stdout, "Model endpoint %s: at most %d requests/minute for the whole fleet (dispatched at %.3g/s on task queue %s)\n",
			name, e.Limits.RequestsPerMinute, rate, queue)
	}
	return stop, nil
}
