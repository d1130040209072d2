//! `tools`: runs of configured releases, for the coordination service only.

use super::RequestState;
use crate::bindings::tools::{
    Host, RunError, RunInput, RunLimits, RunOutcome, RunOutput, RunReport, RunResources,
};
use crate::tools::{self, Outcome};
use wasmtime::Result;

impl Host for RequestState {
    async fn run(
        &mut self,
        release: String,
        inputs: Vec<RunInput>,
        recipe: String,
    ) -> Result<Result<RunReport, RunError>> {
        let Some(runner) = self.env.tools.clone() else {
            return Ok(Err(RunError::Refused(format!(
                "the {} service may not run tools",
                self.env.service
            ))));
        };
        let mut bound = Vec::with_capacity(inputs.len());
        for input in inputs {
            let Ok(blob) = <[u8; 32]>::try_from(input.blob.as_slice()) else {
                return Ok(Err(RunError::MissingInput(input.role)));
            };
            bound.push(tools::RunInput {
                role: input.role,
                blob,
                type_: input.type_,
            });
        }
        Ok(match runner.run(&release, bound, recipe).await {
            Ok(report) => Ok(wit_report(report)),
            Err(tools::RunError::UnknownRelease) => Err(RunError::UnknownRelease),
            Err(tools::RunError::MissingInput(role)) => Err(RunError::MissingInput(role)),
            Err(tools::RunError::Unavailable) => Err(RunError::Unavailable),
            Err(e @ tools::RunError::Host(_)) => Err(RunError::Refused(e.to_string())),
        })
    }
}

fn wit_report(report: tools::RunReport) -> RunReport {
    let outcome = match report.outcome {
        Outcome::Completed(outputs) => RunOutcome::Completed(
            outputs
                .into_iter()
                .map(|o| RunOutput {
                    role: o.role,
                    ordinal: o.ordinal,
                    type_: o.type_,
                    blob: o.blob.to_vec(),
                    size: o.size,
                })
                .collect(),
        ),
        Outcome::Failed(reason) => RunOutcome::Failed(reason),
    };
    let limits = report.limits;
    RunReport {
        outcome,
        used: RunResources {
            fuel: report.used.fuel,
            peak_memory: report.used.peak_memory,
            wall_us: u64::try_from(report.used.wall.as_micros()).unwrap_or(u64::MAX),
        },
        limits: RunLimits {
            fuel: limits.fuel,
            memory: limits.memory as u64,
            wall_ms: u64::try_from(limits.wall.as_millis()).unwrap_or(u64::MAX),
            outputs: limits.outputs,
            output_bytes: limits.output_bytes,
        },
    }
}
