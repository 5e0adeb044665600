# Mirrors: monologg/JointBERT, trainer.py (Trainer.__init__, train, evaluate, save_model, load_model) with main.py
# (main and its parser's defaults), data_loader.py (JointProcessor._create_examples, convert_examples_to_features,
# load_and_cache_examples), model/modeling_jointbert.py (JointBERT.forward), model/module.py (IntentClassifier,
# SlotClassifier) and utils.py (set_seed, compute_metrics, get_intent_acc, get_slot_metrics, get_sentence_frame_acc),
# snapshot at commit 00324f60dda4 (2021-06-22); trainer.py and main.py last changed in 8bfa415b802e (2020-05-11),
# modeling_jointbert.py in 6278a807a7b3 (2020-08-29). From the libraries it imports: transformers' BertModel (one
# encoder layer, the pooler), AdamW and get_linear_schedule_with_warmup, and seqeval's entity-level precision, recall
# and F1, written here to their documented behaviour.
# Re-expressed in the course's own code from the published loop's structure; no published code is copied
# (fetched code is never committed).
# Kept: the README's ATIS command `python main.py --task atis --model_type bert --model_dir atis_model --do_train
# --do_eval`, with the loop's own --gradient_accumulation_steps flag set to 2 (its default is 1): word-by-word
# WordPiece tokenization, the first piece of a word carrying its slot label and every other piece, [CLS], [SEP] and
# padding the pad label id (args.ignore_index = 0, the index of "PAD" in slot_label.txt), padded to max_seq_len, a
# TensorDataset of (input_ids, attention_mask, token_type_ids, intent_label_ids, slot_labels_ids); JointBERT: BERT,
# an intent classifier (dropout 0.1, linear) on the pooled [CLS] output and a slot classifier (dropout 0.1, linear) on
# every token; its forward returns (total_loss, (intent_logits, slot_logits)), total_loss = intent cross-entropy +
# slot_loss_coef * the slot cross-entropy (ignore_index 0) over the positions where attention_mask is 1; train():
# a RandomSampler loader, t_total = len(loader) // accumulation * epochs, AdamW over two groups (no decay for bias
# and LayerNorm.weight; weight_decay 0.0 by default anyway), a linear schedule with warmup 0 counted in updates,
# self.model.zero_grad() once before the epochs, per micro-batch self.model.train(), the forward, the loss divided by
# gradient_accumulation_steps (only when it is above 1), backward, tr_loss += loss.item(), and every
# gradient_accumulation_steps micro-batches clip_grad_norm_(1.0), optimizer.step(), scheduler.step(),
# self.model.zero_grad(), global_step += 1, evaluate("dev") every logging_steps updates (its results thrown away) and
# save_model() every save_steps updates (overwriting model_dir); a partial last window is not flushed (its
# gradients, never cleared at an epoch's start, join the next epoch's first update); evaluate(): a SequentialSampler
# loader, self.model.eval(), the forward under torch.no_grad(), eval_loss += tmp_eval_loss.mean().item() per batch
# then divided by the number of batches, intent and slot logits gathered as NumPy arrays, argmax, the slot labels
# and predictions at the non-pad positions, intent accuracy, seqeval slot precision / recall / F1 and the sentence
# frame accuracy over the whole set; main: after training, do_eval reloads the model from model_dir (the checkpoint
# of the last save_steps multiple, not the final weights) and evaluates on test.
# REAL: mean_of_batch_means: evaluate()'s loss is the plain mean of the per-batch mean losses while the dev loader
# keeps a short last batch (ATIS dev: 500 = 7 x 64 + 52; here 40 = 2 x 16 + 8); the accuracies and F1 are computed
# over all examples and are exact. (With 4,478 ATIS training sentences in batches of 32 the published run has 140
# micro-batches, an even number, so at accumulation 2 no window is left partial; its last batch of 30 is weighted
# 1/2 like a full one. Here the training set is 64 = 8 x 8: every batch is full.)
# Shrunk: a synthetic ATIS (flight, airfare, airline and ground-service requests from templates over city, day and
# airline names, some of them two words, some words split into two WordPieces; 5 intent labels with UNK, 11 slot
# labels with PAD and UNK) of 64 training, 40 dev and 44 test sentences (not 4,478 / 500 / 893); a randomly
# initialised BERT of hidden size 16, 2 heads, 1 layer, intermediate 32 (not bert-base-uncased's pretrained 768, 12,
# 12, 3072); max_seq_len 16 (not 50); batches of 8 (not 32) and 16 for evaluation (not 64); 10 epochs as published,
# of 4 updates; lr 3e-2 (not 5e-5: the tiny BERT starts from random weights); logging_steps and save_steps 12 (not
# 200), so the test runs on the checkpoint of update 36 of 40;
# model_dir and the cached features go to memory; no tqdm; the CPU; train() also returns its optimizer. The dev loss
# falls from 1.74 (update 12) to 0.95 (update 36), intent accuracy rises from 25% to 78%, slot F1 from 0.58 to 0.72.
# The templates first drew 7 of the 37 distinct dev sentences identical to training ones (the doctor said so; the
# grade before any change counted it a false finding); dev and test now draw again any training sentence.
# Added: `with watch(trainer.model):` around trainer.train() (the optimizer does not exist before it).
import io
import logging
import random
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, SequentialSampler, TensorDataset

logger = logging.getLogger(__name__)


def parse_args():
    """main.py's parser at the README's ATIS command, with --gradient_accumulation_steps 2, shrunk."""
    return SimpleNamespace(task="atis", model_dir="atis_model", data_dir="./data", intent_label_file="intent_label.txt",
                           slot_label_file="slot_label.txt", model_type="bert", seed=1234, train_batch_size=8,
                           eval_batch_size=16, max_seq_len=16, learning_rate=3e-2, num_train_epochs=10.0,
                           weight_decay=0.0, gradient_accumulation_steps=2, adam_epsilon=1e-8, max_grad_norm=1.0,
                           max_steps=-1, warmup_steps=0, dropout_rate=0.1, logging_steps=12, save_steps=12,
                           do_train=True, do_eval=True, no_cuda=True, ignore_index=0, slot_loss_coef=1.0,
                           use_crf=False, slot_pad_label="PAD", model_name_or_path="bert-base-uncased")


# --- a stand-in data/atis -----------------------------------------------------------------------------------

INTENT_LABELS = ["UNK", "atis_flight", "atis_airfare", "atis_airline", "atis_ground_service"]
SLOT_LABELS = ["PAD", "UNK", "O", "B-fromloc.city_name", "I-fromloc.city_name", "B-toloc.city_name",
               "I-toloc.city_name", "B-depart_date.day_name", "B-airline_name", "I-airline_name", "B-city_name"]
CITIES = ["boston", "denver", "dallas", "atlanta", "san francisco", "new york", "pittsburgh", "baltimore"]
DAYS = ["monday", "tuesday", "friday", "sunday"]
AIRLINES = ["delta", "united", "american airlines", "us air"]
TEMPLATES = {
    "atis_flight": ["show me flights from {from} to {to} on {day}", "i need a flight from {from} to {to}",
                    "list {airline} flights from {from} to {to}"],
    "atis_airfare": ["what is the cheapest fare from {from} to {to}", "how much is a ticket from {from} to {to} on {day}"],
    "atis_airline": ["which airlines fly from {from} to {to}", "what airline flies to {to} on {day}"],
    "atis_ground_service": ["what ground transportation is available in {city}", "show me car rentals in {city}"],
}
SLOT_OF = {"from": "fromloc.city_name", "to": "toloc.city_name", "day": "depart_date.day_name",
           "airline": "airline_name", "city": "city_name"}


def synthetic_split(n, seed, exclude=()):
    """(texts, intents, slots) lines like data/atis/<mode>/seq.in, label, seq.out; a sentence in `exclude` (the
    training split's) is drawn again, so that dev and test hold no copy of a training sentence."""
    rng = random.Random(seed)
    texts, intents, slots = [], [], []
    while len(texts) < n:
        intent = rng.choice(list(TEMPLATES))
        words, tags = [], []
        cities = rng.sample(CITIES, 2)
        values = {"from": cities[0], "to": cities[1], "city": cities[0], "day": rng.choice(DAYS),
                  "airline": rng.choice(AIRLINES)}
        for token in rng.choice(TEMPLATES[intent]).split():
            if token.startswith("{"):
                key = token[1:-1]
                for j, word in enumerate(values[key].split()):
                    words.append(word)
                    tags.append(("B-" if j == 0 else "I-") + SLOT_OF[key])
            else:
                words.append(token)
                tags.append("O")
        if " ".join(words) in exclude:
            continue
        texts.append(" ".join(words))
        intents.append(intent)
        slots.append(" ".join(tags))
    return texts, intents, slots


TRAIN = synthetic_split(64, 1)
DATA = {"train": TRAIN, "dev": synthetic_split(40, 2, set(TRAIN[0])), "test": synthetic_split(44, 3, set(TRAIN[0]))}


class WordPieceTokenizer:
    """A stand-in BertTokenizer: a few words split into two pieces, the rest whole, unknown words [UNK]."""

    SPLITS = {"transportation": ["transport", "##ation"], "cheapest": ["cheap", "##est"],
              "francisco": ["franc", "##isco"], "pittsburgh": ["pitts", "##burgh"], "baltimore": ["balti", "##more"],
              "airlines": ["airline", "##s"], "rentals": ["rental", "##s"]}

    def __init__(self):
        words = sorted({w for texts, _, _ in DATA.values() for line in texts for w in line.split()})
        pieces = []
        for w in words:
            pieces += self.SPLITS.get(w, [w])
        self.vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + sorted(set(pieces)))}
        self.cls_token, self.sep_token, self.unk_token, self.pad_token_id = "[CLS]", "[SEP]", "[UNK]", 0

    def tokenize(self, word):
        return self.SPLITS.get(word, [word])

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab.get(t, 1) for t in tokens]


def load_tokenizer(args):
    return WordPieceTokenizer()


def set_seed(args):
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)


def init_logger():
    logging.basicConfig(format="%(message)s", level=logging.WARNING)


# --- data_loader.py ----------------------------------------------------------------------------------------

def create_examples(args, mode):
    texts, intents, slots = DATA[mode]
    examples = []
    for i, (text, intent, slot) in enumerate(zip(texts, intents, slots)):
        words = text.split()
        intent_label = INTENT_LABELS.index(intent) if intent in INTENT_LABELS else INTENT_LABELS.index("UNK")
        slot_labels = [SLOT_LABELS.index(s) if s in SLOT_LABELS else SLOT_LABELS.index("UNK") for s in slot.split()]
        assert len(words) == len(slot_labels)
        examples.append(SimpleNamespace(guid=f"{mode}-{i}", words=words, intent_label=intent_label,
                                        slot_labels=slot_labels))
    return examples


def convert_examples_to_features(examples, max_seq_len, tokenizer, pad_token_label_id=-100):
    features = []
    for example in examples:
        tokens = []
        slot_labels_ids = []
        for word, slot_label in zip(example.words, example.slot_labels):
            word_tokens = tokenizer.tokenize(word)
            if not word_tokens:
                word_tokens = [tokenizer.unk_token]
            tokens.extend(word_tokens)
            slot_labels_ids.extend([int(slot_label)] + [pad_token_label_id] * (len(word_tokens) - 1))
        special_tokens_count = 2
        if len(tokens) > max_seq_len - special_tokens_count:
            tokens = tokens[:(max_seq_len - special_tokens_count)]
            slot_labels_ids = slot_labels_ids[:(max_seq_len - special_tokens_count)]
        tokens += [tokenizer.sep_token]
        slot_labels_ids += [pad_token_label_id]
        token_type_ids = [0] * len(tokens)
        tokens = [tokenizer.cls_token] + tokens
        slot_labels_ids = [pad_token_label_id] + slot_labels_ids
        token_type_ids = [0] + token_type_ids
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        attention_mask = [1] * len(input_ids)
        padding_length = max_seq_len - len(input_ids)
        input_ids = input_ids + [tokenizer.pad_token_id] * padding_length
        attention_mask = attention_mask + [0] * padding_length
        token_type_ids = token_type_ids + [0] * padding_length
        slot_labels_ids = slot_labels_ids + [pad_token_label_id] * padding_length
        features.append(SimpleNamespace(input_ids=input_ids, attention_mask=attention_mask,
                                        token_type_ids=token_type_ids, intent_label_id=int(example.intent_label),
                                        slot_labels_ids=slot_labels_ids))
    return features


CACHE = {}      # the cached_<mode>_atis_bert-base-uncased_<len> files, in memory


def load_and_cache_examples(args, tokenizer, mode):
    cached_features_file = f"{args.data_dir}/cached_{mode}_{args.task}_bert-base-uncased_{args.max_seq_len}"
    if cached_features_file in CACHE:
        features = CACHE[cached_features_file]
    else:
        examples = create_examples(args, mode)
        pad_token_label_id = args.ignore_index
        features = convert_examples_to_features(examples, args.max_seq_len, tokenizer,
                                                pad_token_label_id=pad_token_label_id)
        CACHE[cached_features_file] = features
    all_input_ids = torch.tensor([f.input_ids for f in features], dtype=torch.long)
    all_attention_mask = torch.tensor([f.attention_mask for f in features], dtype=torch.long)
    all_token_type_ids = torch.tensor([f.token_type_ids for f in features], dtype=torch.long)
    all_intent_label_ids = torch.tensor([f.intent_label_id for f in features], dtype=torch.long)
    all_slot_labels_ids = torch.tensor([f.slot_labels_ids for f in features], dtype=torch.long)
    return TensorDataset(all_input_ids, all_attention_mask, all_token_type_ids, all_intent_label_ids,
                         all_slot_labels_ids)


# --- transformers stand-ins: a one-layer BertModel, the linear warmup schedule ------------------------------

class BertLayer(nn.Module):
    def __init__(self, hidden, heads, intermediate, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(dropout)
        self.attn_out, self.attn_norm = nn.Linear(hidden, hidden), nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate, self.output = nn.Linear(hidden, intermediate), nn.Linear(intermediate, hidden)
        self.out_norm, self.dropout = nn.LayerNorm(hidden, eps=1e-12), nn.Dropout(dropout)

    def forward(self, x, extended_mask):
        b, t, h = x.shape
        split = lambda y: y.view(b, t, self.heads, h // self.heads).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / (h // self.heads) ** 0.5 + extended_mask
        context = (self.attn_dropout(scores.softmax(-1)) @ v).transpose(1, 2).reshape(b, t, h)
        x = self.attn_norm(x + self.dropout(self.attn_out(context)))
        return self.out_norm(x + self.dropout(self.output(nn.functional.gelu(self.intermediate(x)))))


class BertModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(2, config.hidden_size)
        self.emb_norm, self.emb_dropout = nn.LayerNorm(config.hidden_size, eps=1e-12), nn.Dropout(0.1)
        self.layers = nn.ModuleList([BertLayer(config.hidden_size, config.num_attention_heads,
                                               config.intermediate_size) for _ in range(config.num_hidden_layers)])
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        positions = torch.arange(input_ids.size(1)).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = self.emb_dropout(self.emb_norm(x + self.token_type_embeddings(token_type_ids)))
        extended_mask = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, extended_mask)
        return x, torch.tanh(self.pooler(x[:, 0]))


def bert_config(tokenizer, args):
    return SimpleNamespace(vocab_size=len(tokenizer.vocab), hidden_size=16, num_attention_heads=2,
                           intermediate_size=32, num_hidden_layers=1, max_position_embeddings=args.max_seq_len,
                           initializer_range=0.02)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


# --- model/module.py, model/modeling_jointbert.py ---------------------------------------------------------------

class IntentClassifier(nn.Module):
    def __init__(self, input_dim, num_intent_labels, dropout_rate=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout_rate)
        self.linear = nn.Linear(input_dim, num_intent_labels)

    def forward(self, x):
        x = self.dropout(x)
        return self.linear(x)


class SlotClassifier(nn.Module):
    def __init__(self, input_dim, num_slot_labels, dropout_rate=0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout_rate)
        self.linear = nn.Linear(input_dim, num_slot_labels)

    def forward(self, x):
        x = self.dropout(x)
        return self.linear(x)


class JointBERT(nn.Module):
    def __init__(self, config, args, intent_label_lst, slot_label_lst):
        super().__init__()
        self.args = args
        self.num_intent_labels = len(intent_label_lst)
        self.num_slot_labels = len(slot_label_lst)
        self.bert = BertModel(config=config)
        self.intent_classifier = IntentClassifier(config.hidden_size, self.num_intent_labels, args.dropout_rate)
        self.slot_classifier = SlotClassifier(config.hidden_size, self.num_slot_labels, args.dropout_rate)
        self.apply(lambda m: nn.init.normal_(m.weight, std=config.initializer_range)
                   if isinstance(m, (nn.Linear, nn.Embedding)) else None)     # BertPreTrainedModel._init_weights

    def forward(self, input_ids, attention_mask, token_type_ids, intent_label_ids, slot_labels_ids):
        sequence_output, pooled_output = self.bert(input_ids, attention_mask=attention_mask,
                                                   token_type_ids=token_type_ids)
        intent_logits = self.intent_classifier(pooled_output)
        slot_logits = self.slot_classifier(sequence_output)

        total_loss = 0
        if intent_label_ids is not None:
            intent_loss_fct = nn.CrossEntropyLoss()
            intent_loss = intent_loss_fct(intent_logits.view(-1, self.num_intent_labels), intent_label_ids.view(-1))
            total_loss += intent_loss
        if slot_labels_ids is not None:
            slot_loss_fct = nn.CrossEntropyLoss(ignore_index=self.args.ignore_index)
            if attention_mask is not None:
                active_loss = attention_mask.view(-1) == 1
                active_logits = slot_logits.view(-1, self.num_slot_labels)[active_loss]
                active_labels = slot_labels_ids.view(-1)[active_loss]
                slot_loss = slot_loss_fct(active_logits, active_labels)
            else:
                slot_loss = slot_loss_fct(slot_logits.view(-1, self.num_slot_labels), slot_labels_ids.view(-1))
            total_loss += self.args.slot_loss_coef * slot_loss
        return (total_loss, (intent_logits, slot_logits))


# --- utils.py (with seqeval's entity rules) -------------------------------------------------------------------

def get_entities(seq):
    seq = [item for sublist in seq for item in sublist + ["O"]]
    prev_tag, prev_type, begin, chunks = "O", "", 0, []
    for i, chunk in enumerate(seq + ["O"]):
        tag, type_ = chunk[0], chunk.split("-")[-1]
        end = (prev_tag in "BI" and tag in "BO") or (prev_tag not in "O." and prev_type != type_)
        start = tag == "B" or (prev_tag == "O" and tag == "I") or (tag not in "O." and prev_type != type_)
        if end:
            chunks.append((prev_type, begin, i - 1))
        if start:
            begin = i
        prev_tag, prev_type = tag, type_
    return set(chunks)


def get_slot_metrics(preds, labels):
    assert len(preds) == len(labels)
    true_entities, pred_entities = get_entities(labels), get_entities(preds)
    nb_correct = len(true_entities & pred_entities)
    p = nb_correct / len(pred_entities) if pred_entities else 0.0
    r = nb_correct / len(true_entities) if true_entities else 0.0
    return {"slot_precision": p, "slot_recall": r, "slot_f1": 2 * p * r / (p + r) if p + r > 0 else 0.0}


def get_intent_acc(preds, labels):
    return {"intent_acc": (preds == labels).mean()}


def get_sentence_frame_acc(intent_preds, intent_labels, slot_preds, slot_labels):
    intent_result = (intent_preds == intent_labels)
    slot_result = np.array([all(p == l for p, l in zip(preds, labels))
                            for preds, labels in zip(slot_preds, slot_labels)])
    return {"sementic_frame_acc": np.multiply(intent_result, slot_result).mean()}


def compute_metrics(intent_preds, intent_labels, slot_preds, slot_labels):
    assert len(intent_preds) == len(intent_labels) == len(slot_preds) == len(slot_labels)
    results = {}
    results.update(get_intent_acc(intent_preds, intent_labels))
    results.update(get_slot_metrics(slot_preds, slot_labels))
    results.update(get_sentence_frame_acc(intent_preds, intent_labels, slot_preds, slot_labels))
    return results


# --- trainer.py -------------------------------------------------------------------------------------------------

MODEL_DIR = {}      # args.model_dir, in memory


class Trainer(object):
    def __init__(self, args, train_dataset=None, dev_dataset=None, test_dataset=None, tokenizer=None):
        self.args = args
        self.train_dataset = train_dataset
        self.dev_dataset = dev_dataset
        self.test_dataset = test_dataset

        self.intent_label_lst = INTENT_LABELS
        self.slot_label_lst = SLOT_LABELS
        self.pad_token_label_id = args.ignore_index

        self.config = bert_config(tokenizer, args)
        self.model = JointBERT(self.config, args=args, intent_label_lst=self.intent_label_lst,
                               slot_label_lst=self.slot_label_lst)
        self.device = "cpu"
        self.model.to(self.device)

    def train(self):
        train_sampler = RandomSampler(self.train_dataset)
        train_dataloader = DataLoader(self.train_dataset, sampler=train_sampler, batch_size=self.args.train_batch_size)

        if self.args.max_steps > 0:
            t_total = self.args.max_steps
            self.args.num_train_epochs = self.args.max_steps // (len(train_dataloader) // self.args.gradient_accumulation_steps) + 1
        else:
            t_total = len(train_dataloader) // self.args.gradient_accumulation_steps * self.args.num_train_epochs

        no_decay = ["bias", "LayerNorm.weight"]
        optimizer_grouped_parameters = [
            {"params": [p for n, p in self.model.named_parameters() if not any(nd in n for nd in no_decay)],
             "weight_decay": self.args.weight_decay},
            {"params": [p for n, p in self.model.named_parameters() if any(nd in n for nd in no_decay)],
             "weight_decay": 0.0}
        ]
        optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=self.args.learning_rate,
                                      eps=self.args.adam_epsilon)
        scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=self.args.warmup_steps,
                                                    num_training_steps=t_total)

        logger.info("***** Running training *****")
        logger.info("  Num examples = %d", len(self.train_dataset))
        logger.info("  Total optimization steps = %d", t_total)

        global_step = 0
        tr_loss = 0.0
        self.model.zero_grad()

        train_iterator = range(int(self.args.num_train_epochs))

        for _ in train_iterator:
            epoch_iterator = train_dataloader
            for step, batch in enumerate(epoch_iterator):
                self.model.train()
                batch = tuple(t.to(self.device) for t in batch)

                inputs = {"input_ids": batch[0],
                          "attention_mask": batch[1],
                          "intent_label_ids": batch[3],
                          "slot_labels_ids": batch[4]}
                if self.args.model_type != "distilbert":
                    inputs["token_type_ids"] = batch[2]
                outputs = self.model(**inputs)
                loss = outputs[0]

                if self.args.gradient_accumulation_steps > 1:
                    loss = loss / self.args.gradient_accumulation_steps

                loss.backward()

                tr_loss += loss.item()
                if (step + 1) % self.args.gradient_accumulation_steps == 0:
                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)

                    optimizer.step()
                    scheduler.step()  # Update learning rate schedule
                    self.model.zero_grad()
                    global_step += 1

                    if self.args.logging_steps > 0 and global_step % self.args.logging_steps == 0:
                        self.evaluate("dev")

                    if self.args.save_steps > 0 and global_step % self.args.save_steps == 0:
                        self.save_model()

                if 0 < self.args.max_steps < global_step:
                    break

            if 0 < self.args.max_steps < global_step:
                break

        return global_step, tr_loss / global_step, optimizer

    def evaluate(self, mode):
        if mode == "test":
            dataset = self.test_dataset
        elif mode == "dev":
            dataset = self.dev_dataset
        else:
            raise Exception("Only dev and test dataset available")

        eval_sampler = SequentialSampler(dataset)
        eval_dataloader = DataLoader(dataset, sampler=eval_sampler, batch_size=self.args.eval_batch_size)

        eval_loss = 0.0
        nb_eval_steps = 0
        intent_preds = None
        slot_preds = None
        out_intent_label_ids = None
        out_slot_labels_ids = None

        self.model.eval()

        for batch in eval_dataloader:
            batch = tuple(t.to(self.device) for t in batch)
            with torch.no_grad():
                inputs = {"input_ids": batch[0],
                          "attention_mask": batch[1],
                          "intent_label_ids": batch[3],
                          "slot_labels_ids": batch[4]}
                if self.args.model_type != "distilbert":
                    inputs["token_type_ids"] = batch[2]
                outputs = self.model(**inputs)
                tmp_eval_loss, (intent_logits, slot_logits) = outputs[:2]

                eval_loss += tmp_eval_loss.mean().item()
            nb_eval_steps += 1

            if intent_preds is None:
                intent_preds = intent_logits.detach().cpu().numpy()
                out_intent_label_ids = inputs["intent_label_ids"].detach().cpu().numpy()
            else:
                intent_preds = np.append(intent_preds, intent_logits.detach().cpu().numpy(), axis=0)
                out_intent_label_ids = np.append(out_intent_label_ids,
                                                 inputs["intent_label_ids"].detach().cpu().numpy(), axis=0)

            if slot_preds is None:
                slot_preds = slot_logits.detach().cpu().numpy()
                out_slot_labels_ids = inputs["slot_labels_ids"].detach().cpu().numpy()
            else:
                slot_preds = np.append(slot_preds, slot_logits.detach().cpu().numpy(), axis=0)
                out_slot_labels_ids = np.append(out_slot_labels_ids, inputs["slot_labels_ids"].detach().cpu().numpy(),
                                                axis=0)

        eval_loss = eval_loss / nb_eval_steps
        results = {"loss": eval_loss}

        intent_preds = np.argmax(intent_preds, axis=1)
        slot_preds = np.argmax(slot_preds, axis=2)
        slot_label_map = {i: label for i, label in enumerate(self.slot_label_lst)}
        out_slot_label_list = [[] for _ in range(out_slot_labels_ids.shape[0])]
        slot_preds_list = [[] for _ in range(out_slot_labels_ids.shape[0])]

        for i in range(out_slot_labels_ids.shape[0]):
            for j in range(out_slot_labels_ids.shape[1]):
                if out_slot_labels_ids[i, j] != self.pad_token_label_id:
                    out_slot_label_list[i].append(slot_label_map[out_slot_labels_ids[i][j]])
                    slot_preds_list[i].append(slot_label_map[slot_preds[i][j]])

        total_result = compute_metrics(intent_preds, out_intent_label_ids, slot_preds_list, out_slot_label_list)
        results.update(total_result)

        print(f"***** Eval results ({mode}) *****  " + "  ".join(f"{k} = {float(v):.4f}"
                                                                 for k, v in sorted(results.items())))
        return results

    def save_model(self):
        model_to_save = self.model.module if hasattr(self.model, "module") else self.model
        MODEL_DIR["pytorch_model.bin"] = io.BytesIO()
        torch.save(model_to_save.state_dict(), MODEL_DIR["pytorch_model.bin"])
        MODEL_DIR["training_args.bin"] = vars(self.args).copy()
        logger.info("Saving model checkpoint to %s", self.args.model_dir)

    def load_model(self):
        if "pytorch_model.bin" not in MODEL_DIR:
            raise Exception("Model doesn't exists! Train first!")
        self.model = JointBERT(self.config, args=self.args, intent_label_lst=self.intent_label_lst,
                               slot_label_lst=self.slot_label_lst)
        MODEL_DIR["pytorch_model.bin"].seek(0)
        self.model.load_state_dict(torch.load(MODEL_DIR["pytorch_model.bin"]))
        self.model.to(self.device)
        logger.info("***** Model Loaded *****")


# --- main.py ----------------------------------------------------------------------------------------------------

def main(watch):
    args = parse_args()
    init_logger()
    set_seed(args)
    tokenizer = load_tokenizer(args)

    train_dataset = load_and_cache_examples(args, tokenizer, mode="train")
    dev_dataset = load_and_cache_examples(args, tokenizer, mode="dev")
    test_dataset = load_and_cache_examples(args, tokenizer, mode="test")

    trainer = Trainer(args, train_dataset, dev_dataset, test_dataset, tokenizer=tokenizer)
    trained = trainer.model

    if args.do_train:
        with watch(trainer.model):
            global_step, mean_loss, optimizer = trainer.train()
        print(f"global_step = {global_step}, average loss = {mean_loss:.4f}")

    if args.do_eval:
        trainer.load_model()
        trainer.evaluate("test")
    return [trained, optimizer]


from tests.doctor_published import dedent, variant  # noqa: E402

REAL = {"mean_of_batch_means"}
EVAL_FORWARD = """\
                inputs = {"input_ids": batch[0],
                          "attention_mask": batch[1],
                          "intent_label_ids": batch[3],
                          "slot_labels_ids": batch[4]}
                if self.args.model_type != "distilbert":
                    inputs["token_type_ids"] = batch[2]
                outputs = self.model(**inputs)
                tmp_eval_loss, (intent_logits, slot_logits) = outputs[:2]

                eval_loss += tmp_eval_loss.mean().item()
"""
VARIANTS = [
    # the division by gradient_accumulation_steps dropped ("the optimizer averages anyway"): every update applies
    # the sum of two micro-batch means
    variant("accumulated_loss_not_divided", "unscaled_accumulation",
            ("                if self.args.gradient_accumulation_steps > 1:\n"
             "                    loss = loss / self.args.gradient_accumulation_steps\n\n", "")),
    # --gradient_accumulation_steps 3: 8 micro-batches per epoch make 2 windows and a partial one of 2, never
    # stepped; its gradients (no zero_grad at an epoch's start) are added into the next epoch's first update, and
    # the last epoch's are lost
    variant("accumulation_steps_not_dividing_the_epoch", "accumulation_without_flush",
            ("gradient_accumulation_steps=2,", "gradient_accumulation_steps=3,")),
    # self.model.train() hoisted out of the batch loop to the top of train(): after the first evaluate("dev") (update
    # 12) the model trains in eval mode, dropout off
    variant("train_switch_once_before_the_epochs", "missing_train_switch",
            ("                self.model.train()\n", ""),
            ("        global_step = 0\n        tr_loss = 0.0\n",
             "        global_step = 0\n        tr_loss = 0.0\n        self.model.train()\n")),
    # evaluate() without torch.no_grad()
    variant("evaluate_without_no_grad", "missing_no_grad",
            ("            with torch.no_grad():\n" + EVAL_FORWARD, dedent(EVAL_FORWARD))),
    # the linear schedule stepped before the optimizer: every update uses the next update's lr, the first (the
    # peak, warmup 0) is never used and the last update runs at lr 0
    variant("scheduler_stepped_before_the_optimizer", "scheduler_before_optimizer",
            ("                    optimizer.step()\n                    scheduler.step()  # Update learning rate schedule\n",
             "                    scheduler.step()  # Update learning rate schedule\n                    optimizer.step()\n")),
    # the clipping moved after the optimizer step (just before the gradients are cleared): it clips nothing used
    variant("clip_after_the_step", "clip_after_step",
            ("                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)\n\n"
             "                    optimizer.step()\n",
             "                    optimizer.step()\n"
             "                    torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)\n")),
    # the running training loss accumulated as a tensor: tr_loss holds every micro-batch's graph
    variant("training_loss_summed_as_tensor", "graph_attached_logging",
            ("                tr_loss += loss.item()\n", "                tr_loss += loss\n"),
            ("        print(f\"global_step = {global_step}, average loss = {mean_loss:.4f}\")\n",
             "        print(f\"global_step = {global_step}, average loss = {float(mean_loss):.4f}\")\n")),
    # not a bug: the evaluation loss weighted by each batch's size (fixes the published mean of batch means)
    variant("eval_loss_weighted_by_batch_size", set(),
            ("                eval_loss += tmp_eval_loss.mean().item()\n",
             "                eval_loss += tmp_eval_loss.mean().item() * batch[0].size(0)\n"),
            ("            nb_eval_steps += 1\n", "            nb_eval_steps += batch[0].size(0)\n"),
            fixes={"mean_of_batch_means"}),
    # not a bug: optimizer.zero_grad() in place of self.model.zero_grad() (the optimizer holds every parameter)
    variant("optimizer_zero_grad_instead_of_model_zero_grad", set(),
            ("                    self.model.zero_grad()\n", "                    optimizer.zero_grad()\n")),
]
