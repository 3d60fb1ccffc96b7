package dev.placement.flink;

import org.apache.flink.api.common.JobID;
import org.apache.flink.client.program.rest.RestClusterClient;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Submits {@link SteeringJob} to a running session cluster over its REST API, as a JobGraph with
 * no user jar (the JobManager runs with this module's classes on its classpath).
 *
 * <p>Usage: SubmitJob REST_HOST REST_PORT PARALLELISM [chain=true|false]
 */
public final class SubmitJob {
    public static void main(String[] args) throws Exception {
        String host = args[0];
        int port = Integer.parseInt(args[1]);
        int parallelism = Integer.parseInt(args[2]);
        boolean chain = args.length < 4 || Boolean.parseBoolean(args[3]);

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        SteeringJob.build(env, parallelism, chain);
        JobGraph jobGraph = env.getStreamGraph().getJobGraph();
        jobGraph.setJobID(new JobID());

        Configuration conf = new Configuration();
        conf.set(RestOptions.ADDRESS, host);
        conf.set(RestOptions.PORT, port);
        try (RestClusterClient<String> client = new RestClusterClient<>(conf, "local-session")) {
            JobID id = client.submitJob(jobGraph).get();
            System.out.println("JOB_ID=" + id);
            jobGraph.getVertices().forEach(v -> System.out.println(
                    "VERTEX " + v.getID() + " " + v.getName() + " parallelism=" + v.getParallelism()));
        }
    }
}
