"""Valid files of every language the syntax checks read: modern, realistic code that must
never be refused (test_syntax.py)."""

VALID = {
    "Card.tsx": r"""import React, { useMemo } from "react";

type CardProps<T> = {
  items: readonly T[];
  render: (item: T, index: number) => React.ReactNode;
  title?: string;
};

export function Card<T,>({ items, render, title = "Items" }: CardProps<T>): JSX.Element {
  const count = useMemo(() => items.length, [items]);
  return (
    <section className="card" aria-label={title}>
      <h2>{title} ({count})</h2>
      <ul>
        {items.map((item, index) => (
          <li key={index}>{render(item, index)}</li>
        ))}
      </ul>
      {count === 0 ? <p>Nothing yet.</p> : null}
    </section>
  );
}

export const Empty = (): JSX.Element => <Card<string> items={[]} render={(s) => s} />;
""",
    "Cargo.toml": r'''[package]
name = "demo"
version = "0.1.0"
edition = "2021"
authors = ["Ann <ann@example.com>"]

[dependencies]
serde = { version = "1", features = ["derive"] }
tokio.version = "1"
tokio.features = ["full"]

[dev-dependencies]
"quoted key" = '0.3'

[[bin]]
name = "demo"
path = "src/main.rs"

[profile.release]
lto = true
opt-level = 3
ratio = 1.5e3
when = 1979-05-27T07:32:00Z
hex = 0xDEAD_BEEF
multi = """
multi-line
string"""
''',
    "Main.java": r'''package com.example;

import java.util.List;
import java.util.Map;
import java.util.function.Function;
import java.util.stream.Collectors;

sealed interface Shape permits Circle, Square {}

record Circle(double radius) implements Shape {
    Circle {
        if (radius < 0) throw new IllegalArgumentException("radius");
    }
}

record Square(double side) implements Shape {}

@FunctionalInterface
interface Transformer<T, R> extends Function<T, R> {}

public class Main {
    private static final Map<String, Integer> COUNTS = Map.of("a", 1);

    static double area(Shape shape) {
        return switch (shape) {
            case Circle c -> Math.PI * c.radius() * c.radius();
            case Square s -> s.side() * s.side();
        };
    }

    public static <T extends Comparable<T>> T max(List<T> items) {
        var best = items.get(0);
        for (var item : items) {
            if (item.compareTo(best) > 0) best = item;
        }
        return best;
    }

    @Override
    public String toString() {
        String text = """
            Hello,
            world
            """;
        return text + COUNTS.entrySet().stream()
                .map(e -> e.getKey() + "=" + e.getValue())
                .collect(Collectors.joining(","));
    }

    public static void main(String[] args) throws Exception {
        Object o = args.length > 0 ? args[0] : 1;
        if (o instanceof String s && !s.isEmpty()) {
            System.out.println(s);
        }
        try (var scanner = new java.util.Scanner(System.in)) {
            System.out.println(area(new Circle(2.0)));
        } catch (IllegalStateException | IllegalArgumentException e) {
            throw new RuntimeException(e);
        }
    }
}
''',
    "app.mjs": r"""import { readFile } from "node:fs/promises";
import path from "node:path";
export * as helpers from "./helpers.js";

const DEFAULTS = Object.freeze({ retries: 3, timeout: 1_000n });

/** A tiny cache with private fields and static blocks. */
export class Cache extends Map {
  #hits = 0;
  static instances = 0;
  static {
    Cache.instances = 0;
  }

  get(key) {
    this.#hits++;
    return super.get(key) ?? null;
  }

  get hits() {
    return this.#hits;
  }

  static #secret() {
    return #hits in this;
  }
}

export async function load(file, { retries = DEFAULTS.retries, ...rest } = {}) {
  for (let attempt = 0; attempt < retries; attempt += 1) {
    try {
      const text = await readFile(path.resolve(file), "utf8");
      return JSON.parse(text)?.data?.[0] ?? rest;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 2 ** attempt * 10));
    }
  }
  throw new Error(`could not read ${file}`);
}

export const sum = (...values) => values.reduce((total, value) => total + value, 0);
const pattern = /^(?<year>\d{4})-(?<month>\d{2})$/u;
let config;
config ??= { verbose: false };
config.verbose ||= process.argv.includes("--verbose");

async function* lines(stream) {
  for await (const chunk of stream) yield* chunk.toString().split("\n");
}

label: for (const [key, value] of Object.entries(DEFAULTS)) {
  if (!value) continue label;
}

const data = await load("data.json");
export default { Cache, load, sum, pattern, lines, data };
""",
    "app.rb": r"""# frozen_string_literal: true

require "json"

module Shop
  class Cart
    attr_reader :items

    def initialize(items = [])
      @items = items
    end

    def total(discount: 0, **options)
      sum = items.sum { |item| item[:price] * item.fetch(:quantity, 1) }
      sum - discount
    end

    def each_item(&block)
      items.each(&block)
    end

    def to_json(*args) = { items: items }.to_json(*args)

    def describe
      case items.size
      in 0 then "empty"
      in 1 then "one item"
      else "#{items.size} items"
      end
    end

    private

    def log(message)
      warn <<~TEXT
        cart: #{message}
      TEXT
    end
  end
end

cart = Shop::Cart.new([{ price: 3, quantity: 2 }])
puts cart.total(discount: 1) unless cart.items.empty?
%w[a b c].each_with_index.map { |(letter, index)| "#{letter}#{index}" }
""",
    "ci.yml": r"""name: CI
on:
  push:
    branches: [main]
  pull_request:

env:
  NODE_VERSION: "20"

defaults: &defaults
  runs-on: ubuntu-latest
  timeout-minutes: 10

jobs:
  test:
    <<: *defaults
    strategy:
      matrix:
        node: [18, 20, 22]
    steps:
      - uses: actions/checkout@v4
      - name: Install
        run: npm ci
      - name: Test
        run: |
          npm test
          echo "done: ${{ matrix.node }}"
      - name: Notes
        run: >-
          folded text
          over lines
        if: ${{ github.event_name == 'push' }}
---
second: document
list:
  - a
  - { key: value, other: 2 }
  - ? complex key
    : complex value
""",
    "component.jsx": r"""import React, { useState } from "react";

export function Counter({ start = 0, label }) {
  const [count, setCount] = useState(start);
  return (
    <>
      <button onClick={() => setCount((c) => c + 1)} disabled={count > 10}>
        {label ?? "Count"}: {count}
      </button>
      {count > 5 && <p className="warn">That is a lot.</p>}
    </>
  );
}
""",
    "deploy.sh": r"""#!/usr/bin/env bash
set -euo pipefail

readonly ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
declare -A COLORS=([ok]=32 [fail]=31)

log() {
  local level="$1"; shift
  printf '\e[%sm%s\e[0m %s\n' "${COLORS[$level]:-0}" "$level" "$*" >&2
}

cleanup() { rm -rf "${TMP_DIR:-}"; }
trap cleanup EXIT

TMP_DIR="$(mktemp -d)"
for file in "$ROOT"/src/*.txt; do
  [[ -f "$file" ]] || continue
  case "${file##*.}" in
    txt) cp -- "$file" "$TMP_DIR/" ;;
    *) log fail "skipping $file" ;;
  esac
done

if (( $# > 0 )) && [[ "$1" =~ ^v[0-9]+$ ]]; then
  version="$1"
else
  version="$(git describe --tags 2>/dev/null || echo dev)"
fi

cat > "$TMP_DIR/VERSION" <<EOT
version=$version
EOT

while read -r line; do
  echo "${line^^}"
done < <(ls "$TMP_DIR")
log ok "deployed ${version}"
""",
    "deploy.yaml": r"""%YAML 1.2
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: "frontend"}
  annotations:
    description: "url: http://example.com:8080/path?x=1#frag"
    note: plain scalar with:colon inside and # not a comment
spec:
  replicas: 3
  template:
    spec:
      containers:
        - name: web
          image: "nginx:1.25"
          args: ["--port", "8080",
                 "--verbose"]
          command:
            - /bin/sh
            - -c
            - |2
                indented more
              echo hi
          env:
            - {name: A, value: "1"}
          ports: [ ]
      extra:
      - - nested
        - list
---
# only a comment
...
---
services:
  db:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: "{{ vault_password }}"
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U postgres"]
      interval: 10s
empty_value:
null_value: ~
bool: yes
date: 2024-01-01
multi_line_plain: this is
  continued here
single: 'it''s'
folded: >
  a
  b

literal_keep: |+
  x

""",
    "index.php": r"""<?php

declare(strict_types=1);

namespace App;

use InvalidArgumentException;

enum Suit: string
{
    case Hearts = 'H';
    case Spades = 'S';

    public function label(): string
    {
        return match ($this) {
            Suit::Hearts => 'Hearts',
            Suit::Spades => 'Spades',
        };
    }
}

final class Card
{
    public function __construct(
        public readonly Suit $suit,
        private readonly int $rank = 1,
    ) {
        if ($rank < 1) {
            throw new InvalidArgumentException("bad rank {$rank}");
        }
    }

    public function name(): ?string
    {
        return $this->suit?->label() . ' ' . $this->rank;
    }
}

$cards = array_map(fn (int $rank): Card => new Card(Suit::Hearts, $rank), range(1, 3));
foreach ($cards as $index => $card) {
    echo $index, ': ', $card->name(), PHP_EOL;
}
?>
<p>Done: <?= count($cards) ?> cards</p>
""",
    "lib.rs": r"""//! A small library.
use std::collections::HashMap;
use std::fmt::{self, Display};

/// Something with a name.
pub trait Named {
    fn name(&self) -> &str;
    fn greet(&self) -> String {
        format!("hello, {}", self.name())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct User<'a> {
    pub name: &'a str,
    pub tags: Vec<String>,
}

impl<'a> Named for User<'a> {
    fn name(&self) -> &str {
        self.name
    }
}

impl Display for User<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.tags.join(", "))
    }
}

pub fn longest<'a, T: AsRef<str> + ?Sized>(a: &'a T, b: &'a T) -> &'a str {
    if a.as_ref().len() >= b.as_ref().len() { a.as_ref() } else { b.as_ref() }
}

macro_rules! square {
    ($x:expr) => {
        $x * $x
    };
}

pub async fn fetch(id: u32) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let mut cache: HashMap<u32, String> = HashMap::new();
    let value = cache.entry(id).or_insert_with(|| format!("{id}"));
    Ok(value.clone())
}

pub fn classify(n: i64) -> &'static str {
    match n {
        i64::MIN..=-1 => "negative",
        0 => "zero",
        x if x % 2 == 0 => "even",
        _ => "odd",
    }
}

pub fn total(values: &[i32]) -> i32 {
    let Some(first) = values.first() else { return 0 };
    values.iter().skip(1).fold(*first, |acc, v| acc + v) + square!(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squares() {
        assert_eq!(square!(3), 9);
    }
}
""",
    "list.h": r"""#ifndef LIST_H
#define LIST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct list {
    void **items;
    size_t len;
};

int list_push(struct list *list, void *item);

#ifdef __cplusplus
}
#endif

#endif
""",
    "main.go": r"""package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Number is any numeric type.
type Number interface {
	~int | ~int64 | ~float64
}

// Sum adds the values.
func Sum[T Number](values ...T) T {
	var total T
	for _, v := range values {
		total += v
	}
	return total
}

type Stack[T any] struct {
	mu    sync.Mutex
	items []T
}

func (s *Stack[T]) Push(item T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, item)
}

var ErrEmpty = errors.New("empty")

func worker(ctx context.Context, jobs <-chan int, results chan<- int) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case job, ok := <-jobs:
			if !ok {
				return nil
			}
			results <- job * 2
		}
	}
}

func main() {
	s := &Stack[string]{}
	s.Push("a")
	m := map[string][]int{"a": {1, 2}, "b": {3}}
	for i := range 3 {
		fmt.Println(i, Sum(m["a"]...))
	}
	go func() { _ = worker(context.Background(), nil, nil) }()
	switch x := any(1).(type) {
	case int:
		fmt.Printf("%d\n", x)
	default:
	}
}
""",
    "package.json": r"""{
  "name": "math-utils",
  "version": "1.2.0",
  "type": "module",
  "scripts": {
    "test": "node --test",
    "lint": "eslint ."
  },
  "dependencies": {},
  "files": ["src", "README.md"],
  "private": false,
  "engines": { "node": ">=18" },
  "config": { "ratio": 1.5e-3, "nothing": null, "escaped": "a \"quote\" and \\ and \u00e9" }
}
""",
    "pyproject.toml": r'''# comment
title = "TOML Example"
"quoted.key" = 1
site."google.com" = true
a.b.c = 1
empty = []
nested = [[1, 2], ["a", "b"], [ { x = 1 } ]]
trailing = [
  1,
  2, # comment
]
int1 = +99
int2 = 1_000
hex = 0xdead_beef
oct = 0o755
bin = 0b1101
flt1 = -3.1415
flt2 = 5e+22
flt3 = 6.626e-34
inf1 = inf
nan1 = -nan
odt1 = 1979-05-27T07:32:00Z
odt2 = 1979-05-27 07:32:00.999999-07:00
ldt = 1979-05-27T00:32:00.999999
ld = 1979-05-27
lt = 07:32:00
lit = 'C:\Users\nodejs\templates'
esc = "tab\t \"quoted\" \u00e9 \U0001F600"
ml2 = """\
  The quick brown \
  fox."""
inline = { first = "Tom", last = "Preston-Werner", pt = { x = 1, y = 2 } }

[dog."tater.man"]
type.name = "pug"

[[products]]
name = "Hammer"

[[products]]

[ spaced . table ]
k = true
''',
    "service.ts": r"""import type { Request, Response } from "express";
import { Injectable } from "./di";

export interface Repository<T extends { id: string }> {
  find(id: string): Promise<T | undefined>;
  save(item: T): Promise<void>;
  readonly name: string;
}

type Handler<T = unknown> = (req: Request, res: Response) => Promise<T>;
type Keys<T> = { [K in keyof T]: T[K] extends Function ? never : K }[keyof T];
type Unwrap<T> = T extends Promise<infer U> ? U : T;

export enum Status {
  Active = "active",
  Disabled = "disabled",
}

function log(target: object, key: string, descriptor: PropertyDescriptor): PropertyDescriptor {
  return descriptor;
}

@Injectable()
export class UserService<T extends { id: string }> implements Repository<T> {
  private readonly items = new Map<string, T>();
  public readonly name = "users";
  #count: number = 0;

  constructor(private readonly prefix: string = "user") {}

  @log
  async find(id: string): Promise<T | undefined> {
    return this.items.get(`${this.prefix}:${id}`);
  }

  async save(item: T): Promise<void> {
    this.items.set(item.id, item);
    this.#count++;
  }

  all<K extends keyof T>(key: K): Array<T[K]> {
    return [...this.items.values()].map((item) => item[key]!);
  }
}

export const config = { port: 8080, host: "localhost" } as const satisfies Record<string, unknown>;
export function assertString(value: unknown): asserts value is string {
  if (typeof value !== "string") throw new TypeError("not a string");
}
declare module "./di" {
  export function Injectable(): ClassDecorator;
}
export abstract class Shape {
  abstract area(): number;
}
const handler: Handler<number> = async (_req, _res) => 42;
export default handler;
""",
    "shapes.cpp": r"""#include "shapes.hpp"
#include <algorithm>
#include <iostream>
#include <map>

using namespace std::string_literals;

int main() {
    std::vector<std::unique_ptr<geo::Shape>> shapes;
    shapes.push_back(std::make_unique<geo::Rect<int>>(2, 3));
    auto [it, inserted] = std::map<std::string, int>{}.emplace("a"s, 1);
    auto square = [](auto x) { return x * x; };
    std::sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
        return a->area() < b->area();
    });
    if (auto n = shapes.size(); n > 0) {
        std::cout << geo::total_area(shapes) << ' ' << square(n) << std::endl;
    }
    return inserted ? 0 : 1;
}
""",
    "shapes.hpp": r"""#pragma once
#include <memory>
#include <string>
#include <vector>

namespace geo {

template <typename T>
concept Numeric = std::is_arithmetic_v<T>;

class Shape {
public:
    virtual ~Shape() = default;
    [[nodiscard]] virtual double area() const noexcept = 0;
};

template <Numeric T>
class Rect final : public Shape {
public:
    constexpr Rect(T w, T h) : w_{w}, h_{h} {}
    [[nodiscard]] double area() const noexcept override { return static_cast<double>(w_ * h_); }

private:
    T w_;
    T h_;
};

inline auto total_area(const std::vector<std::unique_ptr<Shape>>& shapes) -> double {
    double total = 0;
    for (const auto& shape : shapes) {
        total += shape->area();
    }
    return total;
}

}  // namespace geo
""",
    "tsconfig.json": r"""{
  // the compiler's options
  "compilerOptions": {
    "target": "ES2022",
    "strict": true, /* everything */
    "paths": { "@/*": ["./src/*"] },
  },
  "include": ["src", "tests",],
}
""",
    "util.c": r"""#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX(a, b) ((a) > (b) ? (a) : (b))
#ifndef BUFFER_SIZE
#define BUFFER_SIZE 256
#endif

typedef struct node {
    int value;
    struct node *next;
} node_t;

static const char *names[] = {"zero", "one", [5] = "five"};

static node_t *push(node_t *head, int value) {
    node_t *n = malloc(sizeof *n);
    if (n == NULL) {
        return head;
    }
    *n = (node_t){.value = value, .next = head};
    return n;
}

int sum(const int *values, size_t count) {
    int total = 0;
    for (size_t i = 0; i < count; i++) {
        total += values[i];
    }
    return total;
}

int main(int argc, char **argv) {
    char buffer[BUFFER_SIZE];
    snprintf(buffer, sizeof buffer, "%s", argc > 1 ? argv[1] : names[0]);
    node_t *list = push(NULL, MAX(1, 2));
    switch (list->value) {
    case 1:
        puts("one");
        break;
    default:
        printf("%d\n", list->value);
    }
    free(list);
    return strlen(buffer) > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
""",
    "utils.py": r'''"""Helpers."""

from __future__ import annotations


def mean(values: list[float]) -> float:
    match values:
        case []:
            return 0.0
        case [only]:
            return only
    return sum(values) / len(values)
''',
    "widget.h": r"""#pragma once
#include <string>

namespace ui {
class Widget {
public:
    explicit Widget(std::string name) : name_(std::move(name)) {}
    template <typename F>
    void on_click(F&& handler) { handler(*this); }
    const std::string& name() const { return name_; }
private:
    std::string name_;
};
}  // namespace ui
""",
}
