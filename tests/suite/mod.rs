mod support;

mod apply;
mod bridge;
mod commands;
mod flows;
mod resume;
mod validation;
