mod fake_llm;
mod support;

mod apply;
mod bridge;
mod commands;
mod contract;
mod flows;
mod layers;
mod llm;
mod openhands;
mod parallel;
mod recovery;
mod relocatable;
mod resume;
mod sandbox;
mod stream;
mod validation;
