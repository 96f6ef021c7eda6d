"""Generate the labelled review sample (``sample/reviews.jsonl``) that ``experiment=sentilr_tiny``
pre-trains on: deterministic, written for the project (CC0).

Each review gets a star rating 1-5; each of its 3-6 sentences is a praising sentence with
probability (stars - 1) / 4, else a complaining one, and one in four sentences is neutral
narration. Sentences are built from templates, products and real English sentiment words
(so VADER's lexicon rates them), with occasional negation ("not great"), which flips a
word's contribution: word polarity alone does not decide the rating.

    python data_specs/sentiment_reviews/make_sample.py            # the committed sample
    python data_specs/sentiment_reviews/make_sample.py --reviews 20000 --out /tmp/reviews.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
THINGS = ("pasta", "service", "hotel room", "phone", "movie", "staff", "coffee", "laptop",
          "battery", "screen", "soup", "waiter", "concert", "book", "game", "shoes")  # fmt: skip
GOOD = ("great", "excellent", "delicious", "friendly", "wonderful", "amazing", "perfect",
        "lovely", "pleasant", "fantastic", "helpful", "fresh", "comfortable", "superb")  # fmt: skip
BAD = ("terrible", "awful", "rude", "horrible", "disgusting", "broken", "boring", "dirty",
       "poor", "disappointing", "slow", "bland", "noisy", "useless")  # fmt: skip
PRAISE = (
    "the {thing} was {good} .",
    "we really loved the {good} {thing} .",
    "absolutely {good} {thing} , i would recommend it .",
    "the {thing} was not {bad} at all .",
    "i enjoyed every minute , the {thing} felt {good} .",
    "what a {good} {thing} !",
)
COMPLAIN = (
    "the {thing} was {bad} .",
    "we hated the {bad} {thing} .",
    "the {thing} was not {good} , sadly .",
    "i regret buying it , the {thing} felt {bad} .",
    "what a {bad} {thing} , avoid it .",
    "honestly the {thing} was {bad} and overpriced .",
)
NEUTRAL = (
    "we arrived on a tuesday evening .",
    "i ordered the {thing} and a glass of water .",
    "my sister came along with me .",
    "the {thing} arrived after twenty minutes .",
    "it was my second visit this year .",
)


def review(rng: random.Random) -> dict[str, object]:
    stars = rng.randint(1, 5)
    sentences = []
    for _ in range(rng.randint(3, 6)):
        if rng.random() < 0.25:
            template = rng.choice(NEUTRAL)
        elif rng.random() < (stars - 1) / 4:
            template = rng.choice(PRAISE)
        else:
            template = rng.choice(COMPLAIN)
        sentences.append(
            template.format(thing=rng.choice(THINGS), good=rng.choice(GOOD), bad=rng.choice(BAD))
        )
    return {"text": " ".join(sentences), "stars": stars}


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reviews", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "sample" / "reviews.jsonl")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(review(rng)) for _ in range(args.reviews)]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{args.out}: {args.reviews} reviews")
    return args.out


if __name__ == "__main__":
    main()
