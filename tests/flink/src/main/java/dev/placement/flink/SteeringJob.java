package dev.placement.flink;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;

/** The job: a number sequence -> map -> discarding sink, every operator at one parallelism. */
public final class SteeringJob {
    private SteeringJob() {}

    /** Adds the pipeline to {@code env}; vertices are chained into one unless {@code chain} is false. */
    public static void build(StreamExecutionEnvironment env, int parallelism, boolean chain) {
        env.setParallelism(parallelism);
        if (!chain) {
            env.disableOperatorChaining();
        }
        env.fromSequence(0, Long.MAX_VALUE)
                .name("sequence")
                .map(new Square())
                .name("square")
                .sinkTo(new DiscardingSink<>())
                .name("discard");
    }

    /** A trivial map so the job has a user function. */
    public static final class Square implements MapFunction<Long, Long> {
        @Override
        public Long map(Long value) {
            return value * value;
        }
    }
}
