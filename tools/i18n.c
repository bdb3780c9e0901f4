/* i18n.c -- the message catalogue (see i18n.h): one table of key, English,
 * Chinese.  The pages' words are here rather than in their HTML so that
 * one --lang flag switches the live page, the report and the demo's
 * explanation alike. */
#include "i18n.h"

#include <string.h>

typedef struct i18n_msg {
    const char *key, *en, *zh;
} i18n_msg;

static const i18n_msg catalogue[] = {
    /* ---- both pages ------------------------------------------------------------ */
    {"page.neurons_title", "Inside the FFN: which neurons each token opens",
     "FFN 内部：每个词元打开了哪些神经元"},
    {"page.neurons_lead",
     "An FFN is a key-value memory: FFN(x) = \u03a3 m\u1d62\u00b7v\u1d62, with m\u1d62 = "
     "act(gate\u1d62\u00b7x)\u00b7(up\u1d62\u00b7x) and v\u1d62 column i of down_proj. Click a "
     "token to see its strongest neurons and the tokens their value vectors promote (the logit "
     "lens). Different tokens open different gates.",
     "FFN 是一个键值记忆：FFN(x) = \u03a3 m\u1d62\u00b7v\u1d62，其中 m\u1d62 = "
     "act(gate\u1d62\u00b7x)\u00b7(up\u1d62\u00b7x)，v\u1d62 是 down_proj 的第 i 列。点击一个词元，"
     "查看它最强的神经元，以及这些神经元的值向量所推高的词元（logit lens）。不同的词元打开不同的门。"},
    {"page.layer", "layer", "层"},
    {"page.model", "model", "模型"},
    {"page.neuron", "neuron", "神经元"},
    {"page.gate", "gate act(g\u00b7x)", "门 act(g\u00b7x)"},
    {"page.up", "up (u\u00b7x)", "up (u\u00b7x)"},
    {"page.product", "product m", "乘积 m"},
    {"page.promotes", "promotes (logit lens of v\u1d62)", "推高的词元（v\u1d62 的 logit lens）"},
    {"page.click_token", "Click a token above.", "请点击上面的一个词元。"},
    /* ---- the live page (ffn serve) ------------------------------------------------ */
    {"live.title", "ffn serve: explore the model live", "ffn serve：在线探索模型"},
    {"live.text_label", "Type a text:", "输入一段文字："},
    {"live.tokens_title", "Tokens", "词元"},
    {"live.tokens_lead", "The text as the model reads it, one box per token. Click one.",
     "模型读到的文本，每个方框是一个词元。点击其中一个。"},
    {"live.predict_title", "Next token: before and after your edits",
     "下一个词元：编辑前与编辑后"},
    {"live.predict_lead",
     "The model's probabilities for the token after the text. Switch neurons off or scale them "
     "in the table below and watch the prediction change: grey is before, blue after the edits. "
     "Edits act on m\u1d62, the input of down_proj; the model on disk is never changed.",
     "模型对文本之后下一个词元的概率。在下表中关闭或缩放神经元，观察预测如何变化：灰色是编辑前，"
     "蓝色是编辑后。编辑作用于 m\u1d62（down_proj 的输入）；磁盘上的模型永远不会被改变。"},
    {"live.kl", "KL(before \u2016 after)", "KL(编辑前 \u2016 编辑后)"},
    {"live.trace_title", "Where is a fact? Causal tracing", "事实在哪里？因果追踪"},
    {"live.trace_lead",
     "Corrupt the subject's embeddings with noise, then restore one layer's state at one "
     "position at a time and see how much of the answer's probability comes back.",
     "用噪声破坏主语的嵌入，再逐一恢复某一层在某个位置的状态，看答案的概率恢复了多少。"},
    {"live.subject", "subject", "主语"},
    {"live.target", "answer (optional)", "答案（可选）"},
    {"live.trace_run", "trace", "追踪"},
    {"live.trace_p", "p(answer)", "p(答案)"},
    {"live.trace_corrupt", "with the subject corrupted", "（主语被破坏后）"},
    {"live.edits", "edits", "编辑"},
    {"live.no_edits", "No edits: before and after are the same.",
     "没有编辑：编辑前后相同。"},
    {"live.clear_edits", "clear all edits", "清除所有编辑"},
    {"live.off", "off", "关闭"},
    {"live.scale", "scale", "缩放"},
    {"live.label", "label (gate probe)", "标签（门探针）"},
    {"live.label_none", "no labels: ", "没有标签："},
    {"live.label_note",
     "Label: the word class the neuron's gate is most selective for on the built-in corpus (ffn "
     "inspect gates), with its selectivity d in pooled standard deviations.",
     "标签：在内置语料上，该神经元的门最有选择性的词类（ffn inspect gates），以及选择性 d"
     "（以合并标准差为单位）。"},
    {"live.neurons_of", "Strongest neurons of token", "最强的神经元，词元"},
    {"live.all_layers", "every layer", "所有层"},
    {"live.position", "position", "位置"},
    {"live.probability", "probability", "概率"},
    {"live.token", "token", "词元"},
    {"live.n_tokens", "{n} tokens", "{n} 个词元"},
    {"live.before", "before", "编辑前"},
    {"live.after", "after", "编辑后"},
    {"live.error", "error", "错误"},
    {"live.empty", "Type some text to begin.", "请先输入一些文字。"},
    {"live.footer", "served by ffn from 127.0.0.1; nothing leaves this machine",
     "由 ffn 在本机提供；没有任何数据离开这台机器"},
    {"live.edited", "edited", "已编辑"},
    {"live.edited_n", "{n} edits in memory; the file on disk is unchanged",
     "内存中有 {n} 处编辑；磁盘上的文件没有改变"},
    {"live.edit_title", "Edit a fact: ROME, or fine-tuning one layer", "编辑一个事实：ROME，或微调一层"},
    {"live.edit_lead",
     "Rewrite what the model says after a prompt by changing one layer's down_proj: ROME's "
     "rank-one update, or plain fine-tuning of that matrix. The model on disk does not change; "
     "the page then runs on the edited copy until you reset it.",
     "通过修改某一层的 down_proj 来改写模型在提示之后说的话：ROME 的秩一更新，或者直接微调这个矩阵。"
     "磁盘上的模型不会改变；之后页面在编辑后的副本上运行，直到你重置它。"},
    {"live.edit_prompt", "prompt", "提示"},
    {"live.edit_target", "new object", "新宾语"},
    {"live.edit_method", "method", "方法"},
    {"live.edit_run", "edit", "编辑"},
    {"live.edit_reset", "reset", "重置"},
    {"live.edit_save", "save edited model", "保存编辑后的模型"},
    {"live.edit_running", "editing (this holds the model; other requests wait)...",
     "正在编辑（期间模型被占用，其他请求需等待）……"},
    {"live.edit_done", "edited layer {layer} with {method}: '{old}' \u2192 '{target}'",
     "已用 {method} 编辑第 {layer} 层：'{old}' \u2192 '{target}'"},
    {"live.edit_reset_done", "reset: the weights as loaded", "已重置：恢复为加载时的权重"},
    {"live.edit_saved", "saved as", "已保存为"},
    {"live.edit_off", "editing is off: ", "编辑不可用："},
    {"live.edit_measure", "measure", "指标"},
    {"live.edit_p_new", "p(new object | prompt)", "p(新宾语 | 提示)"},
    {"live.edit_p_old", "p(old object | prompt)", "p(旧宾语 | 提示)"},
    {"live.edit_efficacy", "efficacy: p(new) > p(old) on the prompt", "有效性：提示上 p(新) > p(旧)"},
    {"live.edit_generalisation", "generalisation: the same on paraphrases",
     "泛化：在改述上同样成立"},
    {"live.edit_specificity", "specificity: neighbours keep their own object",
     "特异性：相邻事实保持自己的宾语"},
    {"live.edit_heldout", "held-out loss", "留出损失"},
    {"live.edit_no_fact",
     "The facts file does not have this prompt: scored on the prompt only.",
     "事实文件中没有这个提示：只在提示本身上评分。"},
    {"live.class.name", "name", "人名"},
    {"live.class.pronoun", "pronoun", "代词"},
    {"live.class.object", "object", "物品"},
    {"live.class.verb", "verb", "动词"},
    {"live.class.function", "function", "功能词"},
    {"live.class.modifier", "modifier", "修饰词"},
    {"live.class.punct", "punct", "标点"},
    /* ---- the report (ffn report) ---------------------------------------------------- */
    {"report.nav_curves", "validation loss", "验证损失"},
    {"report.nav_params", "parameters", "参数"},
    {"report.nav_neurons", "neurons", "神经元"},
    {"report.nav_collapse", "linear collapse", "线性坍缩"},
    {"report.curves_title", "Validation loss", "验证损失"},
    {"report.curves_lead",
     "Held-out cross-entropy during training, one line per run (seeds of a variant share a "
     "colour and a dash). Lower is better.",
     "训练过程中留出数据上的交叉熵，每次运行一条线（同一变体的不同种子颜色和虚线相同）。越低越好。"},
    {"report.show_train", "show training loss (thin lines)", "显示训练损失（细线）"},
    {"report.params_title", "Where the parameters go", "参数都在哪里"},
    {"report.count", "count", "统计"},
    {"report.all_params", "all parameters", "全部参数"},
    {"report.active_params", "active per token", "每个词元激活的参数"},
    {"report.collapse_title", "The linear collapse", "线性坍缩"},
    /* ---- the demo's explanation (ffn demo; printf formats) --------------------------- */
    {"demo.rows", "\nwhat the rows show (validation loss; lower is better):\n",
     "\n各行说明（验证损失；越低越好）：\n"},
    {"demo.noise_seeds", "  noise: two standard errors of a difference over %d seeds\n",
     "  noise: 噪声为 %d 个种子上差值的两个标准误\n"},
    {"demo.noise_one",
     "  noise: one seed per variant, so two runs are taken to differ by chance up to ±%.3f (a "
     "seed-to-seed spread of %.2f; --seeds N measures it)\n",
     "  noise: 每个变体只有一个种子，所以两次运行之间 ±%.3f 以内的差异视为偶然（种子间离散度 %.2f；"
     "--seeds N 可以测量它）\n"},
    {"demo.none",
     "  none    %.3f: attention alone; context arrives, but nothing transforms each token after "
     "it.\n",
     "  none    %.3f: 只有注意力；上下文传了进来，但之后没有任何东西变换每个词元。\n"},
    {"demo.better", "better", "更好"},
    {"demo.worse", "worse", "更差"},
    {"demo.same", "no different", "没有差别"},
    {"demo.within", "%s: within the noise of ±%.3f", "%s：在 ±%.3f 的噪声之内"},
    {"demo.beyond", "%s, beyond the noise of ±%.3f", "%s，超出 ±%.3f 的噪声"},
    {"demo.short",
     " At %lld steps the runs are short, and early in training the variants can rank "
     "differently than at the end (ffn demo trains 1500 steps by default).",
     " %lld 步的训练很短，训练早期各变体的排名可能与最终不同（ffn demo 默认训练 1500 步）。"},
    {"demo.long",
     " At this size and length the difference is real for these runs; more seeds (--seeds) tell "
     "whether it holds.",
     " 在这个规模和长度下，这些运行中的差异是真实的；更多种子（--seeds）可以判断它是否成立。"},
    {"demo.vs_none", "none", "none"},
    {"demo.vs_linear", "linear at the same size", "同等规模的 linear"},
    {"demo.vs_gelu", "gelu at equal parameters", "同等参数的 gelu"},
    {"demo.vs_swiglu", "swiglu at equal active parameters", "同等激活参数的 swiglu"},
    {"demo.linear_better",
     "more than the lesson expects of one D x D matrix in disguise (ffn collapse): in a block "
     "the FFN reads RMSNorm(x), which is not linear, and the extra matrix adds capacity a short "
     "run can use.  The lesson's test is the nonlinearity: gelu against linear, below.\n",
     "超出了课程对“一个伪装的 D x D 矩阵”（ffn collapse）的预期：在块中 FFN 读取的是 RMSNorm(x)，"
     "它不是线性的，多出的矩阵增加了短训练可以利用的容量。课程真正的检验是非线性：见下面 gelu 对 "
     "linear。\n"},
    {"demo.linear_same",
     "as expected: without a nonlinearity the FFN is one D x D matrix in disguise (ffn "
     "collapse).\n",
     "符合预期：没有非线性，FFN 就是一个伪装的 D x D 矩阵（ffn collapse）。\n"},
    {"demo.linear_worse",
     "against the expected direction: a linear FFN is one D x D matrix in disguise (ffn "
     "collapse), so it should match none, not lose to it.",
     "与预期方向相反：线性 FFN 是一个伪装的 D x D 矩阵（ffn collapse），它应当与 none 持平，而不是输给它。"},
    {"demo.gelu_better", "the nonlinearity is what makes the FFN's parameters pay.\n",
     "正是非线性让 FFN 的参数发挥了作用。\n"},
    {"demo.gelu_same", "no gain from the nonlinearity can be claimed from these runs.",
     "从这些运行中不能断言非线性带来了收益。"},
    {"demo.gelu_worse", "against the expected direction: the nonlinearity should help.",
     "与预期方向相反：非线性本应有帮助。"},
    {"demo.swiglu_better", "the input-dependent gate helps, as in Shazeer (2020).\n",
     "依赖输入的门有帮助，与 Shazeer (2020) 一致。\n"},
    {"demo.swiglu_same", "no gain from the gate can be claimed at this scale and length.\n",
     "在这个规模和长度下，不能断言门带来了收益。\n"},
    {"demo.swiglu_worse", "against the direction of Shazeer (2020), where the gate helps.",
     "与 Shazeer (2020) 的方向相反，在那里门是有帮助的。"},
    {"demo.moe_used", "%lld of %lld parameters used per token; ",
     "每个词元使用 %lld / %lld 个参数；"},
    {"demo.moe_better", "the extra experts' capacity pays at the same per-token compute.\n",
     "在每个词元计算量相同的情况下，额外专家的容量发挥了作用。\n"},
    {"demo.moe_same", "the extra capacity does not show in these runs.\n",
     "额外的容量在这些运行中没有体现出来。\n"},
    {"demo.moe_worse",
     "against the expected direction: the router must be learned too, and each expert sees "
     "only part of the tokens.",
     "与预期方向相反：路由器也需要学习，而且每个专家只看到一部分词元。"},
};

static const size_t n_catalogue = sizeof catalogue / sizeof catalogue[0];

const char *i18n(ffn_lang lang, const char *key) {
    for (size_t i = 0; i < n_catalogue; i++)
        if (!strcmp(catalogue[i].key, key))
            return lang == FFN_LANG_ZH && catalogue[i].zh ? catalogue[i].zh : catalogue[i].en;
    return key;
}

static void json_text(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

void i18n_json(FILE *f, ffn_lang lang, const char *const *prefixes) {
    fputc('{', f);
    int first = 1;
    for (size_t i = 0; i < n_catalogue; i++) {
        int match = 0;
        for (const char *const *p = prefixes; *p && !match; p++)
            match = !strncmp(catalogue[i].key, *p, strlen(*p));
        if (!match) continue;
        if (!first) fputc(',', f);
        first = 0;
        json_text(f, catalogue[i].key);
        fputc(':', f);
        json_text(f, lang == FFN_LANG_ZH && catalogue[i].zh ? catalogue[i].zh : catalogue[i].en);
    }
    fputc('}', f);
}

size_t i18n_count(size_t *missing_zh) {
    size_t m = 0;
    for (size_t i = 0; i < n_catalogue; i++) m += !catalogue[i].zh;
    if (missing_zh) *missing_zh = m;
    return n_catalogue;
}
