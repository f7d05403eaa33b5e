"""Fine-tune a tiny BERT classifier with the Hugging Face Trainer: a plain script, written as for SageMaker's
Hugging Face estimator.

Hyperparameters arrive as arguments (--batch-size, --epochs, --lr ...), paths from SageMaker's environment
(SM_CHANNEL_TRAIN, SM_MODEL_DIR). Data: ``train.pt`` in the train channel (a dict of tensors
``input_ids`` N x L and ``labels`` N); without a channel, a generated task: does a sentence of random
token ids contain the marker token? The model is built from a config, so nothing is downloaded.
"""

import argparse
import os

import torch
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

VOCAB = 64
MARKER = 7  # the token the classifier learns to spot


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--samples", type=int, default=2048, help="generated dataset size")
    parser.add_argument("--seq-len", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train", default=os.environ.get("SM_CHANNEL_TRAIN"))
    parser.add_argument("--model-dir", default=os.environ.get("SM_MODEL_DIR", "model"))
    return parser.parse_args()


class Sentences(Dataset):
    """Token ids with labels, as a tokenised dataset hands them to the Trainer."""

    def __init__(self, input_ids, labels):
        self.input_ids = input_ids
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {
            "input_ids": self.input_ids[i],
            "attention_mask": torch.ones_like(self.input_ids[i]),
            "labels": self.labels[i],
        }


def generate(n, seq_len, seed):
    """Half the sentences hold the marker token somewhere, the other half never do."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(MARKER + 1, VOCAB, (n, seq_len), generator=g)
    labels = torch.randint(0, 2, (n,), generator=g)
    where = torch.randint(1, seq_len, (n,), generator=g)
    rows = labels.nonzero().flatten()
    ids[rows, where[rows]] = MARKER
    ids[:, 0] = 2  # a [CLS]-like first token
    return ids, labels


def load_data(args):
    path = os.path.join(args.train, "train.pt") if args.train else None
    if path and os.path.isfile(path):
        data = torch.load(path)
        ids, labels = data["input_ids"], data["labels"]
    else:
        ids, labels = generate(args.samples, args.seq_len, args.seed)
    split = int(0.875 * len(labels))
    return Sentences(ids[:split], labels[:split]), Sentences(ids[split:], labels[split:])


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def main():
    args = parse_args()
    train_set, eval_set = load_data(args)
    config = BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=args.seq_len,
        num_labels=2,
    )
    torch.manual_seed(args.seed)
    model = BertForSequenceClassification(config)
    training_args = TrainingArguments(
        output_dir=os.path.join(args.model_dir, "trainer"),
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=128,
        num_train_epochs=args.epochs,
        learning_rate=args.lr,
        eval_strategy="epoch",
        logging_strategy="epoch",
        save_strategy="no",
        report_to=[],
        use_cpu=not torch.cuda.is_available(),
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=args.seed,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_set,
        eval_dataset=eval_set,
        compute_metrics=accuracy,
    )
    trainer.train()
    trainer.save_model(args.model_dir)


if __name__ == "__main__":
    main()
