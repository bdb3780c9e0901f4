/* corpus.c -- the built-in corpus: a generated language about giving, with
 * pronouns that must be resolved, in English and Chinese.
 *
 * Reads top to bottom: the PRNG, the markup both languages are written in,
 * the vocabularies and sentence templates (English then Chinese), the text
 * builder that labels every word, the one engine that renders the markup
 * for either language, then the public entry points.  C holds the engine;
 * what is said, and in which order, is data.
 *
 * Design.  Every sentence has a giver and a receiver (and sometimes a third
 * person) drawn from hundreds of gendered names, an object from hundreds of
 * nouns in categories (food, drink, reading, clothes, tools, toys, things),
 * and a giving verb allowed for that category.  A cause clause says why,
 * through a pronoun that refers to one of the two: a receiver's cause fits
 * the receiver ("was hungry", food only) and a giver's cause fits the giver
 * ("had too many").  Genders are drawn independently, so in about half of
 * the sentences the pronoun's gender alone names the referent and in the
 * other half only the predicate's meaning does.  Templates move the people
 * around (receiver first, passive, questions, "when ...", relative clauses,
 * reported speech), so the role is never just a position.
 *
 * The generator is deterministic: xoshiro256** seeded by splitmix64, integer
 * arithmetic only, no locale, so a seed gives the same bytes everywhere.
 * The engine draws from the generator exactly where the markup says (a
 * choice, a pick from a list, a noun phrase), so a template read left to
 * right is also the order of its random draws. */
#include "ffn/data.h"
#include "base/common.h"

#include <stdio.h>
#include <string.h>

#include "base/rng.h"
#include "data/facts_internal.h"

/* ---- PRNG (src/base/rng.h) ---------------------------------------------------- */

/* 1 with probability pct/100. */
static int rng_pct(ffn_rng *r, int pct) { return (int)ffn_rng_below(r, 100) < pct; }

#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))
#define PICK(r, a) ((a)[ffn_rng_below((r), (uint64_t)COUNT(a))])

/* ---- the markup -------------------------------------------------------------
 * Phrases and sentence templates are one markup: tokens separated by single
 * spaces, rendered left to right.
 *
 *   word/c       a word of class c: n p o v f m . (name, pronoun, object,
 *                verb, function, modifier, punct); no class means function
 *   $S $O $P $Q  this person: subject, object, possessive determiner,
 *                possessive pronoun (he him his his / 他 他 他的); in a
 *                sentence template this person is the giver
 *   $s $o $p $q  the other person (in a sentence template the receiver)
 *   $W           "who" as a relative pronoun referring to this person
 *   $I           the object: "it" when definite, "one" when not (en), 它 (zh)
 *   $N $M        the object's noun, its measure word (zh)
 *   {slot}       a part of the scene (see `say_slot`): {giver} {receiver}
 *                {third}, the verb's {past} {base} {part} {prep}, the
 *                object's noun phrase {np} {np:the} {np:nopossessive}
 *                {np:relative} or bare {noun}, a {cause}, {followup},
 *                {adjunct}, {relative}, {object_relative}
 *   {cause:R+F=H} a cause about R (receiver, giver, other = the one the
 *                previous cause was not about; default: 55% receiver),
 *                flags +subject (starts with $S and does not mention the
 *                other person) and +ask (can be asked "who ...?"), $S said
 *                as H (=name, =who; default a pronoun); then {ask} says it
 *                again as a question, {answer} names its person and {aux}
 *                is the answer's auxiliary (was, had, did)
 *   [60 A | 40 B] a weighted choice: one draw below the sum of the weights
 *   [?c A | B]   A when the condition holds, else B; no draw.  c is dative
 *                (the verb takes "X gave Y the O"; zh: "X给Y V了", kind 1)
 *                or object categories, e.g. ?food,drink
 *   <name>       a named fragment of the same language, rendered in place
 *
 * In a cause or follow-up $S... refer to the person it is about; `ask` (en)
 * is the auxiliary that answers "Who <phrase>?" ('w' was, 'h' had, 'd'
 * did), 0 when the phrase does not start with $S or cannot be asked. */

/* Object categories, as bits, so verbs and causes can say where they fit. */
enum {
    C_FOOD = 1, C_DRINK = 2, C_READ = 4, C_WEAR = 8, C_TOOL = 16, C_TOY = 32, C_THING = 64,
    C_ALL = 127
};

typedef struct noun {
    const char *word;
    const char *measure; /* zh: the measure word (个, 本, ...); en: NULL */
    int cat;
} noun;

/* A giving verb.  en: past, base and past participle; `dative` when
 * "X gave Y the O" works, `prep` is "to" or "for" ("bought the O for Y").
 * zh: `past` is the verb (递给, 给); kind 0 is "X V了Y一M O" and
 * "X把O V了Y"; kind 1 (`dative` set) is "X给Y V了一M O" (买, 倒, 做). */
typedef struct verb {
    const char *past, *base, *part;
    int dative;
    const char *prep;
    int cats;
} verb;

/* A cause (or a follow-up) in the markup, the categories it fits and, for
 * causes, the auxiliary that answers a question about it. */
typedef struct cause {
    const char *phrase;
    int cats;
    char ask;
} cause;

/* Adjectives before the object, by the categories they suit. */
typedef struct adjective {
    const char *word;
    int cats;
} adjective;

/* What happened next: this person = the receiver (receiver = 1) or giver. */
typedef struct followup {
    const char *phrase;
    int cats, receiver;
} followup;

/* What a template asks of the verb drawn for its scene. */
enum { NEED_ANY = 0, NEED_DATIVE = 1, NEED_TO = 2, NEED_ZH_KIND0 = 4 };

/* A sentence template: how often it is drawn, what its verb must allow,
 * and the sentence in the markup. */
typedef struct sentence_template {
    int weight, need;
    const char *text;
} sentence_template;

/* A named fragment, used in templates as <name>. */
typedef struct fragment {
    const char *name, *text;
} fragment;

/* ---- English ------------------------------------------------------------ */

static const char *const en_female[] = {
    "Mary", "Anna", "Emma", "Sarah", "Linda", "Susan", "Karen", "Lisa", "Nancy", "Betty",
    "Helen", "Sandra", "Donna", "Carol", "Ruth", "Sharon", "Laura", "Emily", "Kimberly",
    "Deborah", "Jessica", "Shirley", "Cynthia", "Angela", "Melissa", "Brenda", "Amy", "Rebecca",
    "Virginia", "Kathleen", "Pamela", "Martha", "Debra", "Amanda", "Stephanie", "Carolyn",
    "Christine", "Janet", "Catherine", "Frances", "Ann", "Joyce", "Diane", "Alice", "Julie",
    "Heather", "Teresa", "Doris", "Gloria", "Evelyn", "Jean", "Cheryl", "Mildred", "Katherine",
    "Joan", "Ashley", "Judith", "Rose", "Janice", "Nicole", "Judy", "Christina", "Kathy",
    "Theresa", "Beverly", "Denise", "Tammy", "Irene", "Jane", "Lori", "Rachel", "Marilyn",
    "Andrea", "Kathryn", "Louise", "Sara", "Anne", "Jacqueline", "Wanda", "Bonnie", "Julia",
    "Ruby", "Lois", "Tina", "Phyllis", "Norma", "Paula", "Diana", "Annie", "Lillian", "Robin",
    "Peggy", "Crystal", "Gladys", "Rita", "Dawn", "Connie", "Florence", "Edna", "Tiffany",
    "Carmen", "Rosa", "Cindy", "Grace", "Wendy", "Victoria", "Edith", "Kim", "Sherry", "Sylvia",
    "Josephine", "Thelma", "Shannon", "Sheila", "Ethel", "Ellen", "Elaine", "Marjorie",
    "Carrie", "Charlotte", "Monica", "Esther", "Pauline", "Juanita", "Anita", "Rhonda", "Hazel",
    "Amber", "Eva", "Debbie", "April", "Clara", "Lucille", "Joanne", "Eleanor", "Valerie",
    "Danielle", "Megan", "Alicia", "Suzanne", "Michelle", "Gail", "Bertha", "Darlene",
    "Veronica", "Jill", "Erin", "Geraldine", "Lauren", "Cathy", "Joann", "Lorraine", "Lynn",
    "Sally", "Regina", "Erica", "Beatrice", "Dolores", "Bernice", "Audrey", "Yvonne", "Annette",
    "June", "Samantha", "Dana", "Stacy", "Ana", "Renee", "Ida", "Vivian", "Roberta", "Holly",
    "Brittany", "Melanie", "Loretta", "Yolanda", "Jeanette", "Laurie", "Katie", "Kristen",
    "Vanessa", "Alma", "Sue", "Elsie", "Beth", "Jeanne", "Vicki", "Carla", "Tara", "Rosemary",
    "Eileen", "Terri", "Gertrude", "Lucy", "Tonya", "Ella", "Stacey", "Wilma", "Gina",
    "Kristin", "Natalie", "Agnes", "Vera", "Charlene", "Bessie", "Delores", "Melinda", "Pearl",
    "Arlene", "Maureen", "Colleen", "Allison", "Tamara", "Joy", "Georgia", "Constance",
    "Lillie", "Claudia", "Jackie", "Marcia", "Tanya", "Nellie", "Minnie", "Marlene", "Heidi",
    "Glenda", "Lydia", "Viola", "Courtney", "Marian", "Stella", "Caroline", "Dora", "Vickie",
    "Mattie", "Maxine", "Irma", "Mabel", "Marsha", "Myrtle", "Lena", "Christy", "Deanna",
    "Patsy", "Hilda", "Gwendolyn", "Jennie", "Nora", "Margie", "Nina", "Cassandra", "Leah",
    "Priscilla", "Carole", "Olga", "Billie", "Dianne", "Tracey", "Leona", "Jenny", "Felicia",
    "Sonia", "Miriam", "Velma", "Becky", "Bobbie", "Violet", "Kristina", "Toni", "Misty", "Mae",
    "Shelly", "Daisy", "Ramona", "Sherri", "Erika", "Katrina", "Claire", "Olivia", "Sophia",
    "Isabella", "Mia", "Chloe", "Zoe", "Hannah", "Lily", "Ava", "Layla", "Maya", "Ingrid",
    "Freya", "Astrid", "Greta", "Ines", "Lucia", "Elena", "Marta", "Sofia", "Fatima", "Aisha",
    "Leila", "Yasmin", "Priya", "Anika", "Keiko", "Yuki", "Mei", "Ling",
};

static const char *const en_male[] = {
    "John", "Peter", "James", "Robert", "Michael", "William", "David", "Richard", "Joseph",
    "Thomas", "Charles", "Christopher", "Daniel", "Matthew", "Anthony", "Mark", "Donald",
    "Steven", "Paul", "Andrew", "Joshua", "Kenneth", "Kevin", "Brian", "George", "Timothy",
    "Ronald", "Edward", "Jason", "Jeffrey", "Ryan", "Jacob", "Gary", "Nicholas", "Eric",
    "Jonathan", "Stephen", "Larry", "Justin", "Scott", "Brandon", "Benjamin", "Samuel",
    "Gregory", "Alexander", "Frank", "Patrick", "Raymond", "Jack", "Dennis", "Jerry", "Tyler",
    "Aaron", "Jose", "Adam", "Nathan", "Henry", "Douglas", "Zachary", "Kyle", "Noah", "Ethan",
    "Jeremy", "Walter", "Christian", "Keith", "Roger", "Terry", "Austin", "Sean", "Gerald",
    "Carl", "Harold", "Dylan", "Arthur", "Lawrence", "Jordan", "Jesse", "Bryan", "Billy",
    "Bruce", "Gabriel", "Joe", "Logan", "Albert", "Willie", "Alan", "Eugene", "Russell",
    "Vincent", "Philip", "Bobby", "Johnny", "Bradley", "Roy", "Ralph", "Randy", "Wayne",
    "Elijah", "Louis", "Harry", "Howard", "Fred", "Victor", "Martin", "Ernest", "Phillip",
    "Todd", "Craig", "Alfred", "Stanley", "Leonard", "Dale", "Clarence", "Earl", "Jimmy",
    "Antonio", "Danny", "Tony", "Luis", "Mike", "Rodney", "Curtis", "Norman", "Allen", "Marvin",
    "Glenn", "Jeffery", "Travis", "Jeff", "Chad", "Lee", "Melvin", "Francis", "Derek", "Troy",
    "Herbert", "Frederick", "Ray", "Joel", "Edwin", "Don", "Eddie", "Ricky", "Randall", "Barry",
    "Bernard", "Mario", "Leroy", "Francisco", "Marcus", "Micheal", "Theodore", "Clifford",
    "Miguel", "Oscar", "Jay", "Jim", "Tom", "Calvin", "Alex", "Jon", "Ronnie", "Bill", "Lloyd",
    "Tommy", "Leon", "Derrick", "Warren", "Darrell", "Jerome", "Floyd", "Leo", "Alvin", "Tim",
    "Wesley", "Gordon", "Dean", "Greg", "Jorge", "Dustin", "Pedro", "Dan", "Lewis", "Corey",
    "Herman", "Maurice", "Vernon", "Roberto", "Clyde", "Glen", "Hector", "Shane", "Ricardo",
    "Sam", "Rick", "Lester", "Brent", "Ramon", "Charlie", "Tyrone", "Gilbert", "Gene", "Marc",
    "Reginald", "Ruben", "Brett", "Nathaniel", "Rafael", "Edgar", "Milton", "Raul", "Ben",
    "Chester", "Cecil", "Duane", "Franklin", "Andre", "Elmer", "Brad", "Ron", "Mitchell",
    "Roland", "Arnold", "Harvey", "Jared", "Adrian", "Karl", "Cory", "Claude", "Erik", "Darryl",
    "Neil", "Javier", "Fernando", "Clinton", "Ted", "Mathew", "Darren", "Lonnie", "Lance",
    "Cody", "Julio", "Kurt", "Allan", "Nelson", "Guy", "Clayton", "Hugh", "Max", "Dwayne",
    "Dwight", "Armando", "Felix", "Jimmie", "Everett", "Ian", "Wallace", "Ken", "Bob", "Jaime",
    "Casey", "Alfredo", "Alberto", "Dave", "Ivan", "Johnnie", "Sidney", "Byron", "Julian",
    "Isaac", "Morris", "Clifton", "Willard", "Daryl", "Ross", "Virgil", "Andy", "Marshall",
    "Salvador", "Perry", "Kirk", "Sergio", "Seth", "Kent", "Terrance", "Rene", "Eduardo",
    "Terrence", "Enrique", "Freddie", "Wade", "Oliver", "Liam", "Lucas", "Mason", "Hugo",
    "Oskar", "Lars", "Sven", "Nils", "Tomas", "Pablo", "Diego", "Mateo", "Omar", "Ali",
    "Hassan", "Karim", "Ravi", "Arjun", "Kenji", "Hiroshi", "Wei", "Chen",
};

static const noun en_nouns[] = {
    /* food */
    {"apple", 0, C_FOOD}, {"banana", 0, C_FOOD}, {"orange", 0, C_FOOD}, {"pear", 0, C_FOOD},
    {"plum", 0, C_FOOD}, {"peach", 0, C_FOOD}, {"mango", 0, C_FOOD}, {"lemon", 0, C_FOOD},
    {"apricot", 0, C_FOOD}, {"fig", 0, C_FOOD}, {"kiwi", 0, C_FOOD}, {"melon", 0, C_FOOD},
    {"coconut", 0, C_FOOD}, {"pineapple", 0, C_FOOD}, {"papaya", 0, C_FOOD},
    {"avocado", 0, C_FOOD}, {"tomato", 0, C_FOOD}, {"carrot", 0, C_FOOD},
    {"potato", 0, C_FOOD}, {"cucumber", 0, C_FOOD}, {"sandwich", 0, C_FOOD},
    {"cookie", 0, C_FOOD}, {"cake", 0, C_FOOD}, {"pie", 0, C_FOOD}, {"muffin", 0, C_FOOD},
    {"bagel", 0, C_FOOD}, {"pretzel", 0, C_FOOD}, {"biscuit", 0, C_FOOD},
    {"doughnut", 0, C_FOOD}, {"cupcake", 0, C_FOOD}, {"cracker", 0, C_FOOD},
    {"waffle", 0, C_FOOD}, {"pancake", 0, C_FOOD}, {"burrito", 0, C_FOOD},
    {"taco", 0, C_FOOD}, {"pizza", 0, C_FOOD}, {"sausage", 0, C_FOOD}, {"burger", 0, C_FOOD},
    {"omelette", 0, C_FOOD}, {"dumpling", 0, C_FOOD}, {"croissant", 0, C_FOOD},
    {"baguette", 0, C_FOOD}, {"bun", 0, C_FOOD}, {"scone", 0, C_FOOD}, {"tart", 0, C_FOOD},
    {"brownie", 0, C_FOOD}, {"lollipop", 0, C_FOOD}, {"egg", 0, C_FOOD},
    {"peanut", 0, C_FOOD}, {"walnut", 0, C_FOOD}, {"chestnut", 0, C_FOOD},
    {"radish", 0, C_FOOD}, {"turnip", 0, C_FOOD}, {"tangerine", 0, C_FOOD},
    {"nectarine", 0, C_FOOD}, {"grapefruit", 0, C_FOOD}, {"watermelon", 0, C_FOOD},
    {"pomegranate", 0, C_FOOD}, {"strawberry", 0, C_FOOD}, {"lychee", 0, C_FOOD},
    {"quiche", 0, C_FOOD}, {"samosa", 0, C_FOOD}, {"pasty", 0, C_FOOD}, {"crepe", 0, C_FOOD},
    {"flapjack", 0, C_FOOD}, {"macaron", 0, C_FOOD}, {"eclair", 0, C_FOOD},
    {"strudel", 0, C_FOOD}, {"cheeseburger", 0, C_FOOD}, {"kebab", 0, C_FOOD},
    {"onigiri", 0, C_FOOD}, {"empanada", 0, C_FOOD}, {"pastry", 0, C_FOOD},
    /* drink */
    {"lemonade", 0, C_DRINK}, {"soda", 0, C_DRINK}, {"milkshake", 0, C_DRINK},
    {"smoothie", 0, C_DRINK}, {"coffee", 0, C_DRINK}, {"tea", 0, C_DRINK},
    {"juice", 0, C_DRINK}, {"cola", 0, C_DRINK}, {"latte", 0, C_DRINK},
    {"espresso", 0, C_DRINK}, {"cappuccino", 0, C_DRINK}, {"cocoa", 0, C_DRINK},
    {"thermos", 0, C_DRINK}, {"flask", 0, C_DRINK}, {"lassi", 0, C_DRINK},
    {"cider", 0, C_DRINK}, {"canteen", 0, C_DRINK}, {"milk", 0, C_DRINK},
    /* reading */
    {"book", 0, C_READ}, {"novel", 0, C_READ}, {"magazine", 0, C_READ},
    {"newspaper", 0, C_READ}, {"comic", 0, C_READ}, {"notebook", 0, C_READ},
    {"diary", 0, C_READ}, {"atlas", 0, C_READ}, {"dictionary", 0, C_READ},
    {"encyclopedia", 0, C_READ}, {"cookbook", 0, C_READ}, {"textbook", 0, C_READ},
    {"storybook", 0, C_READ}, {"journal", 0, C_READ}, {"letter", 0, C_READ},
    {"postcard", 0, C_READ}, {"map", 0, C_READ}, {"poem", 0, C_READ},
    {"pamphlet", 0, C_READ}, {"brochure", 0, C_READ}, {"catalogue", 0, C_READ},
    {"manual", 0, C_READ}, {"guidebook", 0, C_READ}, {"almanac", 0, C_READ},
    {"biography", 0, C_READ}, {"memoir", 0, C_READ}, {"thriller", 0, C_READ},
    {"anthology", 0, C_READ}, {"workbook", 0, C_READ}, {"sketchbook", 0, C_READ},
    {"calendar", 0, C_READ}, {"leaflet", 0, C_READ}, {"booklet", 0, C_READ},
    {"manuscript", 0, C_READ}, {"newsletter", 0, C_READ}, {"crossword", 0, C_READ},
    /* clothes */
    {"scarf", 0, C_WEAR}, {"hat", 0, C_WEAR}, {"coat", 0, C_WEAR}, {"jacket", 0, C_WEAR},
    {"sweater", 0, C_WEAR}, {"jumper", 0, C_WEAR}, {"glove", 0, C_WEAR},
    {"mitten", 0, C_WEAR}, {"shirt", 0, C_WEAR}, {"blouse", 0, C_WEAR},
    {"dress", 0, C_WEAR}, {"skirt", 0, C_WEAR}, {"cap", 0, C_WEAR}, {"beanie", 0, C_WEAR},
    {"hoodie", 0, C_WEAR}, {"cardigan", 0, C_WEAR}, {"vest", 0, C_WEAR},
    {"raincoat", 0, C_WEAR}, {"poncho", 0, C_WEAR}, {"shawl", 0, C_WEAR},
    {"tie", 0, C_WEAR}, {"belt", 0, C_WEAR}, {"bracelet", 0, C_WEAR},
    {"necklace", 0, C_WEAR}, {"ring", 0, C_WEAR}, {"watch", 0, C_WEAR},
    {"brooch", 0, C_WEAR}, {"boot", 0, C_WEAR}, {"sandal", 0, C_WEAR},
    {"slipper", 0, C_WEAR}, {"helmet", 0, C_WEAR}, {"apron", 0, C_WEAR},
    {"kimono", 0, C_WEAR}, {"robe", 0, C_WEAR}, {"gown", 0, C_WEAR},
    {"bandana", 0, C_WEAR}, {"headband", 0, C_WEAR}, {"waistcoat", 0, C_WEAR},
    {"blazer", 0, C_WEAR}, {"overcoat", 0, C_WEAR}, {"parka", 0, C_WEAR},
    {"tunic", 0, C_WEAR},
    /* tools */
    {"hammer", 0, C_TOOL}, {"screwdriver", 0, C_TOOL}, {"wrench", 0, C_TOOL},
    {"saw", 0, C_TOOL}, {"drill", 0, C_TOOL}, {"chisel", 0, C_TOOL},
    {"spanner", 0, C_TOOL}, {"shovel", 0, C_TOOL}, {"spade", 0, C_TOOL},
    {"rake", 0, C_TOOL}, {"hoe", 0, C_TOOL}, {"trowel", 0, C_TOOL}, {"axe", 0, C_TOOL},
    {"ladder", 0, C_TOOL}, {"bucket", 0, C_TOOL}, {"broom", 0, C_TOOL}, {"mop", 0, C_TOOL},
    {"torch", 0, C_TOOL}, {"flashlight", 0, C_TOOL}, {"lantern", 0, C_TOOL},
    {"knife", 0, C_TOOL}, {"ruler", 0, C_TOOL}, {"pencil", 0, C_TOOL}, {"pen", 0, C_TOOL},
    {"marker", 0, C_TOOL}, {"paintbrush", 0, C_TOOL}, {"stapler", 0, C_TOOL},
    {"calculator", 0, C_TOOL}, {"compass", 0, C_TOOL}, {"needle", 0, C_TOOL},
    {"thimble", 0, C_TOOL}, {"crowbar", 0, C_TOOL}, {"mallet", 0, C_TOOL},
    {"toolbox", 0, C_TOOL}, {"funnel", 0, C_TOOL}, {"whisk", 0, C_TOOL},
    {"ladle", 0, C_TOOL}, {"spatula", 0, C_TOOL}, {"kettle", 0, C_TOOL},
    {"teapot", 0, C_TOOL}, {"colander", 0, C_TOOL}, {"grater", 0, C_TOOL},
    {"wheelbarrow", 0, C_TOOL}, {"sieve", 0, C_TOOL}, {"pickaxe", 0, C_TOOL},
    /* toys */
    {"ball", 0, C_TOY}, {"kite", 0, C_TOY}, {"doll", 0, C_TOY}, {"puzzle", 0, C_TOY},
    {"robot", 0, C_TOY}, {"drum", 0, C_TOY}, {"whistle", 0, C_TOY}, {"marble", 0, C_TOY},
    {"skateboard", 0, C_TOY}, {"scooter", 0, C_TOY}, {"bicycle", 0, C_TOY},
    {"tricycle", 0, C_TOY}, {"balloon", 0, C_TOY}, {"frisbee", 0, C_TOY},
    {"rattle", 0, C_TOY}, {"puppet", 0, C_TOY}, {"boomerang", 0, C_TOY},
    {"harmonica", 0, C_TOY}, {"ukulele", 0, C_TOY}, {"kazoo", 0, C_TOY},
    {"xylophone", 0, C_TOY}, {"trumpet", 0, C_TOY}, {"guitar", 0, C_TOY},
    {"violin", 0, C_TOY}, {"flute", 0, C_TOY}, {"jigsaw", 0, C_TOY}, {"rocket", 0, C_TOY},
    {"glider", 0, C_TOY}, {"sailboat", 0, C_TOY}, {"domino", 0, C_TOY},
    {"chessboard", 0, C_TOY}, {"teddy", 0, C_TOY}, {"unicorn", 0, C_TOY},
    {"dinosaur", 0, C_TOY}, {"spinner", 0, C_TOY}, {"tambourine", 0, C_TOY},
    {"accordion", 0, C_TOY},
    /* things */
    {"lamp", 0, C_THING}, {"clock", 0, C_THING}, {"umbrella", 0, C_THING},
    {"key", 0, C_THING}, {"wallet", 0, C_THING}, {"purse", 0, C_THING},
    {"bag", 0, C_THING}, {"backpack", 0, C_THING}, {"suitcase", 0, C_THING},
    {"basket", 0, C_THING}, {"box", 0, C_THING}, {"candle", 0, C_THING},
    {"vase", 0, C_THING}, {"mirror", 0, C_THING}, {"pillow", 0, C_THING},
    {"blanket", 0, C_THING}, {"towel", 0, C_THING}, {"cushion", 0, C_THING},
    {"rug", 0, C_THING}, {"mug", 0, C_THING}, {"cup", 0, C_THING}, {"plate", 0, C_THING},
    {"bowl", 0, C_THING}, {"jar", 0, C_THING}, {"bottle", 0, C_THING},
    {"ticket", 0, C_THING}, {"coin", 0, C_THING}, {"envelope", 0, C_THING},
    {"stamp", 0, C_THING}, {"camera", 0, C_THING}, {"radio", 0, C_THING},
    {"phone", 0, C_THING}, {"laptop", 0, C_THING}, {"charger", 0, C_THING},
    {"battery", 0, C_THING}, {"photograph", 0, C_THING}, {"painting", 0, C_THING},
    {"poster", 0, C_THING}, {"pebble", 0, C_THING}, {"seashell", 0, C_THING},
    {"feather", 0, C_THING}, {"flower", 0, C_THING}, {"rose", 0, C_THING},
    {"tulip", 0, C_THING}, {"cactus", 0, C_THING}, {"bouquet", 0, C_THING},
    {"fan", 0, C_THING}, {"handkerchief", 0, C_THING}, {"comb", 0, C_THING},
    {"toothbrush", 0, C_THING}, {"candlestick", 0, C_THING}, {"keyring", 0, C_THING},
    {"globe", 0, C_THING}, {"telescope", 0, C_THING},
    {"binocular", 0, C_THING}, {"hourglass", 0, C_THING}, {"locket", 0, C_THING},
    {"present", 0, C_THING}, {"parcel", 0, C_THING}, {"souvenir", 0, C_THING},
    {"trophy", 0, C_THING}, {"medal", 0, C_THING}, {"sticker", 0, C_THING},
    {"plant", 0, C_THING}, {"seed", 0, C_THING}, {"notepad", 0, C_THING},
};

static const adjective en_adjectives[] = {
    {"small", C_ALL}, {"big", C_ALL}, {"large", C_ALL}, {"little", C_ALL}, {"tiny", C_ALL},
    {"huge", C_ALL}, {"nice", C_ALL}, {"lovely", C_ALL}, {"spare", C_ALL & ~C_FOOD},
    {"new", C_ALL & ~(C_FOOD | C_DRINK)}, {"old", C_ALL & ~(C_FOOD | C_DRINK)},
    {"cheap", C_ALL}, {"expensive", C_ALL}, {"beautiful", C_ALL & ~C_DRINK},
    {"red", C_ALL & ~C_DRINK}, {"blue", C_ALL & ~(C_FOOD | C_DRINK)},
    {"green", C_ALL & ~C_DRINK}, {"yellow", C_ALL & ~C_DRINK},
    {"purple", C_ALL & ~(C_FOOD | C_DRINK)}, {"black", C_ALL & ~(C_FOOD | C_DRINK)},
    {"white", C_ALL & ~(C_FOOD | C_DRINK)}, {"brown", C_ALL & ~C_DRINK},
    {"pink", C_ALL & ~(C_FOOD | C_DRINK)}, {"grey", C_ALL & ~(C_FOOD | C_DRINK)},
    {"silver", C_WEAR | C_TOOL | C_THING | C_TOY}, {"golden", C_WEAR | C_THING | C_TOY},
    {"shiny", C_ALL & ~(C_FOOD | C_DRINK)}, {"heavy", C_ALL & ~C_DRINK},
    {"striped", C_WEAR | C_TOY | C_THING}, {"woollen", C_WEAR}, {"warm", C_WEAR | C_DRINK | C_FOOD},
    {"fresh", C_FOOD | C_DRINK}, {"sweet", C_FOOD | C_DRINK},
    {"tasty", C_FOOD}, {"delicious", C_FOOD | C_DRINK}, {"homemade", C_FOOD | C_DRINK},
    {"hot", C_DRINK}, {"cold", C_DRINK}, {"iced", C_DRINK}, {"thick", C_READ | C_WEAR},
    {"thin", C_READ}, {"famous", C_READ}, {"funny", C_READ | C_TOY}, {"wooden", C_TOOL | C_TOY | C_THING},
    {"sharp", C_TOOL}, {"sturdy", C_TOOL}, {"useful", C_TOOL | C_THING},
};

static const verb en_verbs[] = {
    {"gave", "give", "given", 1, "to", C_ALL},
    {"handed", "hand", "handed", 1, "to", C_ALL},
    {"passed", "pass", "passed", 1, "to", C_ALL},
    {"sent", "send", "sent", 1, "to", C_ALL},
    {"offered", "offer", "offered", 1, "to", C_ALL},
    {"lent", "lend", "lent", 1, "to", C_ALL & ~(C_FOOD | C_DRINK)},
    {"loaned", "loan", "loaned", 1, "to", C_ALL & ~(C_FOOD | C_DRINK)},
    {"sold", "sell", "sold", 1, "to", C_ALL},
    {"brought", "bring", "brought", 1, "to", C_ALL},
    {"threw", "throw", "thrown", 1, "to", C_FOOD | C_TOY | C_WEAR | C_THING},
    {"tossed", "toss", "tossed", 1, "to", C_FOOD | C_TOY | C_WEAR | C_THING},
    {"mailed", "mail", "mailed", 1, "to", C_READ | C_WEAR | C_TOY | C_THING | C_TOOL},
    {"posted", "post", "posted", 1, "to", C_READ | C_WEAR | C_TOY | C_THING},
    {"promised", "promise", "promised", 1, "to", C_ALL},
    {"slid", "slide", "slid", 1, "to", C_READ | C_DRINK | C_THING | C_FOOD},
    {"left", "leave", "left", 1, "to", C_ALL},
    {"returned", "return", "returned", 0, "to", C_ALL & ~(C_FOOD | C_DRINK)},
    {"donated", "donate", "donated", 0, "to", C_ALL},
    {"delivered", "deliver", "delivered", 0, "to", C_ALL},
    {"served", "serve", "served", 1, "to", C_FOOD | C_DRINK},
    {"fed", "feed", "fed", 1, "to", C_FOOD},
    {"bought", "buy", "bought", 1, "for", C_ALL},
    {"fetched", "fetch", "fetched", 1, "for", C_ALL},
    {"got", "get", "got", 1, "for", C_ALL},
    {"found", "find", "found", 1, "for", C_ALL & ~(C_FOOD | C_DRINK)},
    {"saved", "save", "saved", 1, "for", C_ALL},
    {"made", "make", "made", 1, "for", C_DRINK | C_TOY | C_WEAR},
    {"packed", "pack", "packed", 1, "for", C_FOOD | C_DRINK | C_WEAR},
    {"poured", "pour", "poured", 1, "for", C_DRINK},
    {"picked", "pick", "picked", 0, "for", C_FOOD | C_THING},
};

/* Why the receiver got it: this person = the receiver, other = the giver. */
static const cause en_receiver_causes[] = {
    {"$S needed/v $I", C_ALL, 'd'},
    {"$S had/f asked/v for/f $I", C_ALL, 'h'},
    {"$S had/f lost/v $Q", C_ALL & ~(C_FOOD | C_DRINK), 'h'},
    {"$S had/f always/m wanted/v $I", C_ALL, 'h'},
    {"$S had/v no/f $N", C_ALL, 'd'},
    {"it/p was/v $P birthday/o", C_ALL, 0},
    {"$S had/f been/v so/m kind/m to/f $o", C_ALL, 'h'},
    {"$S had/f helped/v $o with/f the/f garden/o", C_ALL, 'h'},
    {"$S was/v going/v on/f a/f trip/o", C_ALL & ~C_TOOL, 'w'},
    {"$S was/v starting/v a/f new/m job/o", C_ALL, 'w'},
    {"$S had/f just/m won/v a/f race/o", C_ALL, 'h'},
    {"$S had/f broken/v $Q", C_TOOL | C_TOY | C_THING, 'h'},
    {"$S was/v hungry/m", C_FOOD, 'w'},
    {"$S was/v starving/m", C_FOOD, 'w'},
    {"$S had/f not/f eaten/v all/f day/o", C_FOOD, 0},
    {"$S had/f skipped/v lunch/o", C_FOOD, 'h'},
    {"$S had/f forgotten/v $P lunch/o", C_FOOD, 'h'},
    {"$S was/v still/m hungry/m", C_FOOD, 'w'},
    {"$S was/v thirsty/m", C_DRINK, 'w'},
    {"$S had/f been/v running/v all/f morning/o", C_DRINK | C_FOOD, 'h'},
    {"$S felt/v tired/m", C_DRINK, 'd'},
    {"$S was/v bored/m", C_READ | C_TOY, 'w'},
    {"$S loved/v to/f read/v", C_READ, 'd'},
    {"$S had/v an/f exam/o the/f next/m day/o", C_READ, 'd'},
    {"$S was/v studying/v history/o", C_READ, 'w'},
    {"$S was/v ill/m in/f bed/o", C_READ | C_DRINK | C_TOY, 'w'},
    {"$S was/v cold/m", C_WEAR | C_DRINK, 'w'},
    {"$S had/v nothing/f to/f wear/v", C_WEAR, 'd'},
    {"$S was/v going/v to/f a/f wedding/o", C_WEAR, 'w'},
    {"$S had/f torn/v $Q", C_WEAR | C_READ, 'h'},
    {"$S was/v fixing/v $P fence/o", C_TOOL, 'w'},
    {"$S was/v building/v a/f shed/o", C_TOOL, 'w'},
    {"$S had/v work/o to/f do/v", C_TOOL, 'd'},
    {"$S was/v sad/m", C_TOY | C_THING, 'w'},
    {"$S wanted/v to/f play/v", C_TOY, 'd'},
    {"it/p was/v raining/v and/f $S was/v bored/m", C_TOY | C_READ, 0},
    {"$S had/f just/m moved/v into/f a/f new/m flat/o", C_THING | C_TOOL, 'h'},
    {"$S collected/v them/p", C_THING | C_TOY | C_READ, 'd'},
};

/* Why the giver gave it: this person = the giver, other = the receiver. */
static const cause en_giver_causes[] = {
    {"$S had/v too/m many/m", C_ALL, 'd'},
    {"$S had/v two/f", C_ALL, 'd'},
    {"$S no/m longer/m needed/v $I", C_ALL, 'd'},
    {"$S was/v moving/v away/m", C_ALL, 'w'},
    {"$S was/v kind/m", C_ALL, 'w'},
    {"$S was/v generous/m", C_ALL, 'w'},
    {"$S had/f finished/v with/f $I", C_ALL & ~(C_FOOD | C_DRINK), 'h'},
    {"$S did/f not/f want/v $I", C_ALL, 0},
    {"$S had/f bought/v an/f extra/m one/f", C_ALL, 'h'},
    {"$S was/v leaving/v town/o", C_ALL, 'w'},
    {"$S was/v tidying/v $P house/o", C_ALL & ~(C_FOOD | C_DRINK), 'w'},
    {"$S owed/v $o a/f favour/o", C_ALL, 'd'},
    {"$S liked/v $o", C_ALL, 'd'},
    {"$S wanted/v to/f thank/v $o", C_ALL, 'd'},
    {"$S felt/v sorry/m for/f $o", C_ALL, 'd'},
    {"$S was/v in/f a/f good/m mood/o", C_ALL, 'w'},
    {"$S had/v a/f spare/m one/f", C_ALL, 'd'},
    {"$S was/v full/m", C_FOOD | C_DRINK, 'w'},
    {"$S had/f already/m eaten/v", C_FOOD, 'h'},
    {"$S was/v on/f a/f diet/o", C_FOOD | C_DRINK, 'w'},
    {"$S had/f cooked/v too/m much/m", C_FOOD, 'h'},
    {"$S did/f not/f like/v the/f taste/o", C_FOOD | C_DRINK, 0},
    {"$S was/v not/f thirsty/m", C_DRINK, 'w'},
    {"$S had/f made/v too/m much/m", C_DRINK | C_FOOD, 'h'},
    {"$S had/f already/m read/v $I", C_READ, 'h'},
    {"$S had/v two/f copies/o", C_READ, 'd'},
    {"$S had/f outgrown/v $I", C_WEAR | C_TOY, 'h'},
    {"$S had/v too/m many/m clothes/o", C_WEAR, 'd'},
    {"$S had/f finished/v the/f job/o", C_TOOL, 'h'},
    {"$S had/f bought/v a/f new/m one/f", C_TOOL | C_THING | C_TOY | C_WEAR, 'h'},
    {"$S had/f grown/v too/m old/m for/f $I", C_TOY, 'h'},
    {"$S was/v clearing/v out/f $P attic/o", C_TOY | C_THING | C_READ | C_TOOL, 'w'},
};

static const followup en_followups[] = {
    {"$S thanked/v $o", C_ALL, 1},
    {"$S smiled/v at/f $o", C_ALL, 1},
    {"$S ate/v $I", C_FOOD, 1},
    {"$S drank/v $I", C_DRINK, 1},
    {"$S read/v $I", C_READ, 1},
    {"$S put/v $I on/f", C_WEAR, 1},
    {"$S used/v $I", C_TOOL, 1},
    {"$S played/v with/f $I", C_TOY, 1},
    {"$S put/v $I away/m", C_THING | C_TOOL | C_READ | C_WEAR, 1},
    {"$S hugged/v $o", C_ALL, 1},
    {"$S went/v home/o", C_ALL, 0},
    {"$S waved/v goodbye/m", C_ALL, 0},
    {"$S felt/v happy/m", C_ALL, 0},
    {"$S asked/v $o to/f take/v care/o of/f $I", C_ALL & ~(C_FOOD | C_DRINK), 0},
};

/* Relative clauses about a person: "Mary, who lived next door, ...". */
static const char *const en_relatives[] = {
    "lived/v next/m door/o", "worked/v at/f the/f bakery/o", "was/v a/f teacher/o",
    "had/f just/m come/v home/o", "was/v always/m kind/m", "ran/v the/f shop/o on/f the/f corner/o",
    "was/v a/f nurse/o", "had/f just/m finished/v $P lunch/o", "loved/v $P garden/o",
    "was/v a/f baker/o", "played/v the/f piano/o", "lived/v upstairs/m",
    "was/v visiting/v from/f the/f city/o", "drove/v a/f bus/o", "was/v new/m in/f town/o",
};

/* Where the object came from: "the apple that she had bought ...". */
static const char *const en_object_relatives[] = {
    "$S had/f bought/v at/f the/f market/o", "$S had/f found/v in/f the/f attic/o",
    "$S had/f made/v", "$S had/f kept/v for/f years/o", "$S had/f won/v at/f the/f fair/o",
    "$S had/f picked/v up/f in/f town/o",
};

static const char *const en_adjuncts[] = {
    "yesterday/m", "at/f the/f market/o", "in/f the/f park/o", "after/f school/o",
    "on/f Monday/o", "on/f Friday/o", "at/f the/f station/o", "this/f morning/o",
    "in/f the/f kitchen/o", "at/f the/f party/o", "last/m week/o", "in/f the/f garden/o",
};

/* Fragments of English sentences.  <object> is the object and the receiver
 * as the verb allows; <gives> after the giver says the giving, dative 60%
 * of the time when the verb allows it. */
static const fragment en_fragments[] = {
    {"because", "because/f {cause}"},
    {"dative", "{receiver} {np}"},
    {"to", "{np} {prep} {receiver}"},
    {"object", "[?dative <dative> | <to>]"},
    {"gives", "{past} [?dative [60 <dative> | 40 <to>] | <to>]"},
};

static const sentence_template en_templates[] = {
    /* "Mary gave John an apple because he was hungry." with an optional
     * time or place before or after, and the same with "to John" */
    {14, NEED_DATIVE,
     "[10 {adjunct} ,/. {giver} {past} <dative> | 15 {giver} {past} <dative> {adjunct}"
     " | 75 {giver} {past} <dative>] <because> ./."},
    {10, NEED_ANY,
     "[10 {adjunct} ,/. {giver} {past} <to> | 15 {giver} {past} <to> {adjunct}"
     " | 75 {giver} {past} <to>] <because> ./."},
    /* "John was hungry, so Mary gave him an apple." */
    {4, NEED_DATIVE, "{cause:receiver+subject=name} ,/. so/f {giver} {past} $o {np} ./."},
    /* "When John was hungry, Mary gave him an apple." */
    {4, NEED_DATIVE, "when/f {cause:receiver+subject=name} ,/. {giver} {past} $o {np} ./."},
    /* "Since Mary had too many, she gave John an apple." */
    {4, NEED_ANY, "since/f {cause:giver+subject=name} ,/. $S <gives> ./."},
    /* "... because ..., and then he thanked her." and without the cause */
    {5, NEED_ANY, "{giver} <gives> <because> ,/. and/f then/f {followup} ./."},
    {3, NEED_ANY, "{giver} <gives> ,/. and/f then/f {followup} ./."},
    /* "Mary, who lived next door, gave John an apple because he was hungry." */
    {5, NEED_ANY, "{giver} ,/. $W {relative} ,/. {past} <object> <because> ./."},
    /* "Mary gave John the apple that she had bought at the market because ..." */
    {4, NEED_DATIVE, "{giver} {past} {receiver} {np:the} that/f {object_relative} <because> ./."},
    /* "Why did Mary give John the apple? Because he was hungry." */
    {5, NEED_ANY, "why/f did/f {giver} {base} <object> ?/. <because> ./."},
    /* "Mary gave John an apple because he was hungry. Who was hungry? John was." */
    {6, NEED_ANY, "{giver} <gives> because/f {cause+ask} ./. {ask} ?/. {answer} {aux} ./."},
    /* "Mary told Peter that she would give John the apple because ..." */
    {4, NEED_ANY, "{giver} told/v {third} that/f $S would/f {base} <object> <because> ./."},
    /* "After Mary gave John the apple, he thanked her." */
    {4, NEED_ANY, "after/f {giver} <gives> ,/. {followup} ./."},
    /* "Mary asked John if he wanted an apple because he was hungry." */
    {3, NEED_ANY, "{giver} asked/v {receiver} if/f $s wanted/v {np} because/f {cause:receiver} ./."},
    /* "... because she had too many and because he was hungry." */
    {4, NEED_ANY, "{giver} <gives> because/f {cause} and/f because/f {cause:other} ./."},
    /* "Mary did not keep the apple; she gave it to John because ..." */
    {3, NEED_TO, "{giver} did/f not/f keep/v {np:the} ;/. $S {past} $I to/f {receiver} <because> ./."},
    /* "John got an apple from Mary because he was hungry." */
    {5, NEED_ANY,
     "{receiver} [1 got/v | 1 received/v | 1 accepted/v | 1 took/v"
     " | 1 [?food,drink got/v | borrowed/v]] {np:nopossessive} from/f {giver} <because> ./."},
    /* "The apple was given to John by Mary because he was hungry." */
    {4, NEED_ANY, "{np:the} was/f {part} {prep} {receiver} by/f {giver} <because> ./."},
    /* "Mary wanted to give John an apple because he was hungry." */
    {3, NEED_ANY, "{giver} wanted/v to/f {base} <object> <because> ./."},
    /* "Mary gave John an apple. He was hungry." */
    {4, NEED_ANY, "{giver} <gives> ./. {cause} ./."},
    /* "Mary gave an apple to John, who was hungry." */
    {3, NEED_ANY, "{giver} {past} <to> ,/. {cause:receiver+subject=who} ./."},
};

/* ---- Chinese -------------------------------------------------------------- */

static const char *const zh_surnames[] = {
    "王", "李", "张", "刘", "陈", "杨", "黄", "赵", "吴", "周", "徐", "孙", "马", "朱", "胡",
    "郭", "何", "高", "林", "罗", "郑", "梁", "谢", "宋", "唐", "许", "韩", "冯", "邓", "曹",
    "彭", "曾", "萧", "田", "董", "袁", "潘", "蒋", "蔡", "余", "杜", "叶", "程", "苏", "魏",
    "吕", "丁", "沈", "任", "姚",
};

static const char *const zh_female[] = {
    "芳", "娜", "敏", "静", "丽", "艳", "娟", "霞", "秀英", "桂英", "玉兰", "丽娟", "美玲",
    "静怡", "雅婷", "晓燕", "慧敏", "淑芬", "婉清", "思琪", "欣怡", "梦瑶", "佳怡", "雨萱",
    "诗涵", "可馨", "紫涵", "晓红", "春梅", "海燕", "雪梅", "丽华", "秀兰", "凤英", "小红",
    "月婷", "佳琪", "雨婷", "心怡", "梓涵", "若曦", "语嫣", "慧琳", "婷婷", "莉莉", "晶晶",
    "倩", "颖", "蕾", "琳", "萍", "梅", "燕", "薇", "瑶", "婷", "雪", "琴", "兰", "美华",
};

static const char *const zh_male[] = {
    "伟", "强", "磊", "军", "勇", "杰", "涛", "明", "超", "刚", "辉", "鹏", "飞", "斌", "浩",
    "宇", "志强", "建国", "国华", "文博", "浩然", "子轩", "宇航", "俊杰", "天宇", "鹏飞", "志明",
    "家豪", "建华", "海峰", "振宇", "晓东", "立新", "国强", "建军", "德华", "明辉", "志刚",
    "文杰", "伟东", "嘉伟", "思远", "博文", "子豪", "宏伟", "家明", "少华", "永强", "建平",
    "国栋", "天明", "瑞", "峰", "彬", "鑫", "凯", "亮", "冬", "军辉", "成龙",
};

static const noun zh_nouns[] = {
    /* food */
    {"苹果", "个", C_FOOD}, {"香蕉", "根", C_FOOD}, {"橘子", "个", C_FOOD}, {"梨", "个", C_FOOD},
    {"桃子", "个", C_FOOD}, {"芒果", "个", C_FOOD}, {"西瓜", "个", C_FOOD},
    {"葡萄", "串", C_FOOD}, {"蛋糕", "块", C_FOOD}, {"面包", "个", C_FOOD},
    {"饼干", "盒", C_FOOD}, {"包子", "个", C_FOOD}, {"饺子", "盘", C_FOOD},
    {"馒头", "个", C_FOOD}, {"月饼", "个", C_FOOD}, {"粽子", "个", C_FOOD},
    {"三明治", "个", C_FOOD}, {"汉堡", "个", C_FOOD}, {"披萨", "块", C_FOOD},
    {"鸡蛋", "个", C_FOOD}, {"巧克力", "块", C_FOOD}, {"糖果", "颗", C_FOOD},
    {"冰淇淋", "个", C_FOOD}, {"面条", "碗", C_FOOD}, {"米饭", "碗", C_FOOD},
    {"粥", "碗", C_FOOD}, {"烧饼", "个", C_FOOD}, {"煎饼", "张", C_FOOD},
    {"柿子", "个", C_FOOD}, {"草莓", "盒", C_FOOD}, {"樱桃", "盒", C_FOOD},
    {"橙子", "个", C_FOOD}, {"柚子", "个", C_FOOD}, {"菠萝", "个", C_FOOD},
    {"玉米", "根", C_FOOD}, {"红薯", "个", C_FOOD}, {"土豆", "个", C_FOOD},
    {"番茄", "个", C_FOOD}, {"黄瓜", "根", C_FOOD}, {"胡萝卜", "根", C_FOOD},
    {"蛋挞", "个", C_FOOD}, {"饭团", "个", C_FOOD}, {"春卷", "个", C_FOOD},
    {"馄饨", "碗", C_FOOD}, {"鸡腿", "个", C_FOOD}, {"花卷", "个", C_FOOD},
    /* drink */
    {"茶", "杯", C_DRINK}, {"咖啡", "杯", C_DRINK}, {"牛奶", "瓶", C_DRINK},
    {"果汁", "杯", C_DRINK}, {"矿泉水", "瓶", C_DRINK}, {"可乐", "瓶", C_DRINK},
    {"豆浆", "杯", C_DRINK}, {"奶茶", "杯", C_DRINK}, {"汽水", "瓶", C_DRINK},
    {"酸奶", "瓶", C_DRINK}, {"热水", "杯", C_DRINK}, {"柠檬水", "杯", C_DRINK},
    {"绿茶", "杯", C_DRINK}, {"红茶", "杯", C_DRINK},
    /* reading */
    {"书", "本", C_READ}, {"小说", "本", C_READ}, {"杂志", "本", C_READ},
    {"报纸", "份", C_READ}, {"词典", "本", C_READ}, {"地图", "张", C_READ},
    {"日记本", "本", C_READ}, {"漫画", "本", C_READ}, {"课本", "本", C_READ},
    {"字典", "本", C_READ}, {"菜谱", "本", C_READ}, {"画册", "本", C_READ},
    {"诗集", "本", C_READ}, {"信", "封", C_READ}, {"明信片", "张", C_READ},
    {"故事书", "本", C_READ}, {"百科全书", "本", C_READ}, {"练习册", "本", C_READ},
    {"相册", "本", C_READ}, {"日历", "本", C_READ}, {"地图册", "本", C_READ},
    {"笔记本", "个", C_READ},
    /* clothes */
    {"围巾", "条", C_WEAR}, {"帽子", "顶", C_WEAR}, {"外套", "件", C_WEAR},
    {"毛衣", "件", C_WEAR}, {"手套", "副", C_WEAR}, {"袜子", "双", C_WEAR},
    {"衬衫", "件", C_WEAR}, {"裙子", "条", C_WEAR}, {"裤子", "条", C_WEAR},
    {"鞋", "双", C_WEAR}, {"靴子", "双", C_WEAR}, {"雨衣", "件", C_WEAR},
    {"夹克", "件", C_WEAR}, {"背心", "件", C_WEAR}, {"领带", "条", C_WEAR},
    {"腰带", "条", C_WEAR}, {"手表", "块", C_WEAR}, {"项链", "条", C_WEAR},
    {"手镯", "个", C_WEAR}, {"戒指", "枚", C_WEAR}, {"耳环", "对", C_WEAR},
    {"发卡", "个", C_WEAR}, {"睡衣", "件", C_WEAR}, {"棉袄", "件", C_WEAR},
    {"旗袍", "件", C_WEAR}, {"拖鞋", "双", C_WEAR}, {"运动鞋", "双", C_WEAR},
    {"口罩", "个", C_WEAR},
    /* tools */
    {"锤子", "把", C_TOOL}, {"螺丝刀", "把", C_TOOL}, {"扳手", "把", C_TOOL},
    {"锯子", "把", C_TOOL}, {"钳子", "把", C_TOOL}, {"铲子", "把", C_TOOL},
    {"扫帚", "把", C_TOOL}, {"拖把", "把", C_TOOL}, {"梯子", "架", C_TOOL},
    {"水桶", "个", C_TOOL}, {"手电筒", "个", C_TOOL}, {"剪刀", "把", C_TOOL},
    {"尺子", "把", C_TOOL}, {"铅笔", "支", C_TOOL}, {"钢笔", "支", C_TOOL},
    {"毛笔", "支", C_TOOL}, {"刷子", "把", C_TOOL}, {"计算器", "个", C_TOOL},
    {"订书机", "个", C_TOOL}, {"菜刀", "把", C_TOOL}, {"锅", "口", C_TOOL},
    {"水壶", "个", C_TOOL}, {"茶壶", "把", C_TOOL}, {"勺子", "把", C_TOOL},
    {"筷子", "双", C_TOOL}, {"工具箱", "个", C_TOOL}, {"胶带", "卷", C_TOOL},
    {"绳子", "根", C_TOOL}, {"电钻", "把", C_TOOL},
    /* toys */
    {"皮球", "个", C_TOY}, {"风筝", "只", C_TOY}, {"娃娃", "个", C_TOY},
    {"拼图", "盒", C_TOY}, {"玩具车", "辆", C_TOY}, {"积木", "盒", C_TOY},
    {"陀螺", "个", C_TOY}, {"滑板", "个", C_TOY}, {"自行车", "辆", C_TOY},
    {"气球", "个", C_TOY}, {"毽子", "个", C_TOY}, {"跳绳", "根", C_TOY},
    {"口琴", "把", C_TOY}, {"笛子", "支", C_TOY}, {"吉他", "把", C_TOY},
    {"小提琴", "把", C_TOY}, {"鼓", "面", C_TOY}, {"机器人", "个", C_TOY},
    {"玩具熊", "只", C_TOY}, {"弹珠", "颗", C_TOY}, {"飞盘", "个", C_TOY},
    {"魔方", "个", C_TOY}, {"象棋", "副", C_TOY}, {"围棋", "副", C_TOY},
    {"扑克牌", "副", C_TOY}, {"遥控车", "辆", C_TOY}, {"布偶", "个", C_TOY},
    /* things */
    {"台灯", "盏", C_THING}, {"闹钟", "个", C_THING}, {"雨伞", "把", C_THING},
    {"钥匙", "把", C_THING}, {"钱包", "个", C_THING}, {"书包", "个", C_THING},
    {"背包", "个", C_THING}, {"行李箱", "个", C_THING}, {"篮子", "个", C_THING},
    {"盒子", "个", C_THING}, {"蜡烛", "根", C_THING}, {"花瓶", "个", C_THING},
    {"镜子", "面", C_THING}, {"枕头", "个", C_THING}, {"毯子", "条", C_THING},
    {"毛巾", "条", C_THING}, {"杯子", "个", C_THING}, {"盘子", "个", C_THING},
    {"碗", "个", C_THING}, {"瓶子", "个", C_THING}, {"电影票", "张", C_THING},
    {"硬币", "枚", C_THING}, {"信封", "个", C_THING}, {"邮票", "张", C_THING},
    {"相机", "台", C_THING}, {"收音机", "台", C_THING}, {"手机", "部", C_THING},
    {"电脑", "台", C_THING}, {"充电器", "个", C_THING}, {"电池", "节", C_THING},
    {"照片", "张", C_THING}, {"画", "幅", C_THING}, {"海报", "张", C_THING},
    {"贝壳", "个", C_THING}, {"羽毛", "根", C_THING}, {"花", "束", C_THING},
    {"玫瑰", "朵", C_THING}, {"盆栽", "盆", C_THING}, {"仙人掌", "盆", C_THING},
    {"风扇", "台", C_THING}, {"扇子", "把", C_THING}, {"手帕", "块", C_THING},
    {"香水", "瓶", C_THING}, {"肥皂", "块", C_THING}, {"牙刷", "支", C_THING},
    {"梳子", "把", C_THING}, {"礼物", "份", C_THING}, {"红包", "个", C_THING},
    {"钥匙扣", "个", C_THING}, {"门票", "张", C_THING}, {"车票", "张", C_THING},
    {"灯笼", "个", C_THING}, {"茶杯", "个", C_THING}, {"地球仪", "个", C_THING},
    {"望远镜", "个", C_THING}, {"奖杯", "个", C_THING}, {"奖牌", "枚", C_THING},
    {"贴纸", "张", C_THING},
};

static const adjective zh_adjectives[] = {
    {"大", C_FOOD | C_WEAR | C_TOOL | C_TOY | C_THING}, {"小", C_FOOD | C_WEAR | C_TOOL | C_TOY | C_THING},
    {"新", C_ALL & ~(C_FOOD | C_DRINK)}, {"旧", C_ALL & ~(C_FOOD | C_DRINK)},
    {"红", C_FOOD | C_WEAR | C_TOY}, {"蓝", C_WEAR | C_TOY}, {"绿", C_WEAR | C_TOY},
    {"黄", C_WEAR | C_TOY}, {"白", C_WEAR | C_TOY}, {"黑", C_WEAR | C_TOOL | C_TOY},
    {"热", C_DRINK}, {"凉", C_DRINK}, {"甜", C_FOOD | C_DRINK}, {"厚", C_READ | C_WEAR},
    {"漂亮", C_WEAR | C_TOY | C_THING}, {"好看", C_WEAR | C_READ | C_THING},
};

/* zh verbs: kind 0 "X V了Y一M O" / "X把O V了Y"; kind 1 "X给Y V了一M O". */
static const verb zh_verbs[] = {
    {"给", 0, 0, 0, 0, C_ALL},
    {"送给", 0, 0, 0, 0, C_ALL},
    {"递给", 0, 0, 0, 0, C_ALL},
    {"借给", 0, 0, 0, 0, C_ALL & ~(C_FOOD | C_DRINK)},
    {"卖给", 0, 0, 0, 0, C_ALL},
    {"寄给", 0, 0, 0, 0, C_READ | C_WEAR | C_TOY | C_THING | C_TOOL},
    {"扔给", 0, 0, 0, 0, C_FOOD | C_TOY | C_WEAR | C_THING},
    {"交给", 0, 0, 0, 0, C_ALL},
    {"还给", 0, 0, 0, 0, C_ALL & ~(C_FOOD | C_DRINK)},
    {"带给", 0, 0, 0, 0, C_ALL},
    {"留给", 0, 0, 0, 0, C_ALL},
    {"拿给", 0, 0, 0, 0, C_ALL},
    {"传给", 0, 0, 0, 0, C_ALL & ~C_DRINK},
    {"分给", 0, 0, 0, 0, C_FOOD | C_DRINK},
    {"让给", 0, 0, 0, 0, C_ALL},
    {"买", 0, 0, 1, 0, C_ALL},
    {"倒", 0, 0, 1, 0, C_DRINK},
    {"做", 0, 0, 1, 0, C_FOOD},
    {"找", 0, 0, 1, 0, C_ALL & ~(C_FOOD | C_DRINK)},
};

static const cause zh_receiver_causes[] = {
    {"$S 正好/m 需要/v", C_ALL, 1},
    {"$S 饿/m 了/f", C_FOOD, 1},
    {"$S 很/m 饿/m", C_FOOD, 1},
    {"$S 还/m 没/f 吃/v 午饭/o", C_FOOD, 1},
    {"$S 忘/v 带/v 午饭/o 了/f", C_FOOD, 1},
    {"$S 渴/m 了/f", C_DRINK, 1},
    {"$S 刚/m 跑/v 完/f 步/o", C_DRINK | C_FOOD, 1},
    {"$S 喜欢/v 看/v 书/o", C_READ, 1},
    {"$S 明天/o 要/f 考试/v", C_READ | C_TOOL, 1},
    {"$S 觉得/v 无聊/m", C_READ | C_TOY, 1},
    {"$S 在/f 学/v 历史/o", C_READ, 1},
    {"$S 觉得/v 冷/m", C_WEAR | C_DRINK, 1},
    {"$S 要/f 去/v 参加/v 婚礼/o", C_WEAR, 1},
    {"$S 在/f 修/v 篱笆/o", C_TOOL, 1},
    {"$P $N 坏/m 了/f", C_TOOL | C_TOY | C_THING | C_WEAR, 0},
    {"$S 不/f 开心/m", C_TOY | C_THING, 1},
    {"$S 想/v 玩/v", C_TOY, 1},
    {"$S 一直/m 想要/v", C_ALL, 1},
    {"$P 丢/v 了/f", C_ALL & ~(C_FOOD | C_DRINK), 0},
    {"今天/o 是/v $P 生日/o", C_ALL, 0},
    {"$S 没有/v $N", C_ALL, 1},
    {"$S 帮/v 过/f $o 的/f 忙/o", C_ALL, 1},
    {"$S 刚/m 搬/v 了/f 新/m 家/o", C_THING | C_TOOL, 1},
    {"$S 要/f 出/v 远门/o", C_ALL & ~C_TOOL, 1},
    {"$S 生病/v 了/f", C_FOOD | C_DRINK | C_READ, 1},
};

static const cause zh_giver_causes[] = {
    {"$S 有/v 两/f $M", C_ALL, 1},
    {"$P $N 太/m 多/m 了/f", C_ALL, 0},
    {"$S 不/f 再/m 需要/v 了/f", C_ALL, 1},
    {"$S 要/f 搬家/v 了/f", C_ALL, 1},
    {"$S 很/m 大方/m", C_ALL, 1},
    {"$S 心地/o 善良/m", C_ALL, 1},
    {"$S 多/m 买/v 了/f 一/f $M", C_ALL, 1},
    {"$S 欠/v $o 一个/f 人情/o", C_ALL, 1},
    {"$S 喜欢/v $o", C_ALL, 1},
    {"$S 想/v 感谢/v $o", C_ALL, 1},
    {"$S 心情/o 很/m 好/m", C_ALL, 1},
    {"$S 用/v 不/f 着/f 了/f", C_ALL & ~(C_FOOD | C_DRINK), 1},
    {"$S 已经/m 吃/v 饱/m 了/f", C_FOOD | C_DRINK, 1},
    {"$S 在/f 减肥/v", C_FOOD | C_DRINK, 1},
    {"$S 做/v 得/f 太/m 多/m 了/f", C_FOOD | C_DRINK, 1},
    {"$S 不/f 渴/m", C_DRINK, 1},
    {"$S 已经/m 看/v 完/f 了/f", C_READ, 1},
    {"$S 穿/v 不/f 下/f 了/f", C_WEAR, 1},
    {"$S 已经/m 干/v 完/f 活/o 了/f", C_TOOL, 1},
    {"$S 买/v 了/f 新/m 的/f", C_TOOL | C_THING | C_TOY | C_WEAR, 1},
    {"$S 已经/m 长大/v 了/f", C_TOY, 1},
};

static const followup zh_followups[] = {
    {"$S 向/f $o 道谢/v", C_ALL, 1},
    {"$S 对/f $o 笑/v 了/f 笑/v", C_ALL, 1},
    {"$S 把/f $I 吃/v 了/f", C_FOOD, 1},
    {"$S 把/f $I 喝/v 了/f", C_DRINK, 1},
    {"$S 马上/m 读/v 了/f 起来/f", C_READ, 1},
    {"$S 马上/m 穿/v 上/f 了/f", C_WEAR, 1},
    {"$S 马上/m 玩/v 了/f 起来/f", C_TOY, 1},
    {"$S 把/f $I 收/v 好/m 了/f", C_ALL & ~(C_FOOD | C_DRINK), 1},
    {"$S 高兴/m 地/f 回家/v 了/f", C_ALL, 0},
    {"$S 挥/v 手/o 告别/v", C_ALL, 0},
};

static const char *const zh_relatives[] = {
    "住/v 在/f 隔壁/o", "在/f 面包店/o 工作/v", "当/v 老师/o", "刚/m 下班/v", "喜欢/v 种/v 花/o",
    "开/v 小卖部/o", "当/v 护士/o", "会/f 弹/v 钢琴/o", "刚/m 从/f 城里/o 回来/v",
    "开/v 公交车/o",
};

static const char *const zh_object_relatives[] = {
    "$S 刚/m 买/v 的/f", "$S 在/f 集市/o 上/f 买/v 的/f", "$S 自己/p 做/v 的/f",
    "$S 珍藏/v 多年/m 的/f", "$S 在/f 阁楼/o 里/f 找到/v 的/f",
};

static const char *const zh_adjuncts[] = {
    "昨天/o", "今天/o 早上/o", "在/f 公园/o 里/f", "放学/v 后/f", "星期一/o", "在/f 车站/o",
    "在/f 厨房/o 里/f", "上/m 个/f 星期/o",
};

/* Fragments of Chinese sentences: <gives> after the giver, before the
 * object ("递给了李伟" or "给李伟买了"), and <gives_him> with a pronoun. */
static const fragment zh_fragments[] = {
    {"because", "，/. 因为/f {cause}"},
    {"gives", "[?dative 给/f {receiver} {past} 了/f | {past} 了/f {receiver}]"},
    {"gives_him", "[?dative 给/f $o {past} 了/f | {past} 了/f $o]"},
};

static const sentence_template zh_templates[] = {
    /* "王芳昨天给了李伟一个苹果，因为他饿了。" */
    {16, NEED_ANY, "{giver} [20 {adjunct} | 80] <gives> {np} <because> 。/."},
    /* "王芳把苹果递给了李伟，因为他饿了。" */
    {10, NEED_ZH_KIND0, "{giver} 把/f [20 $P | 80] {noun} {past} 了/f {receiver} <because> 。/."},
    /* "因为李伟饿了，所以王芳给了他一个苹果。" */
    {5, NEED_ANY, "因为/f {cause:receiver+subject=name} ，/. 所以/f {giver} <gives_him> {np} 。/."},
    /* "因为王芳已经吃饱了，所以她给了李伟一个苹果。" */
    {4, NEED_ANY, "因为/f {cause:giver+subject=name} ，/. 所以/f $S <gives> {np} 。/."},
    /* "王芳给了李伟一个苹果，然后他向她道谢。" */
    {5, NEED_ANY, "{giver} <gives> {np} ，/. 然后/f {followup} 。/."},
    /* "住在隔壁的王芳给了李伟一个苹果，因为他饿了。" */
    {5, NEED_ANY, "{relative} 的/f {giver} <gives> {np} <because> 。/."},
    /* "王芳给了李伟一个她刚买的苹果，因为他饿了。" */
    {4, NEED_ANY, "{giver} <gives> {np:relative} <because> 。/."},
    /* "王芳为什么给了李伟一个苹果？因为他饿了。" */
    {5, NEED_ANY, "{giver} 为什么/f <gives> {np} ？/. 因为/f {cause} 。/."},
    /* "王芳给了李伟一个苹果，因为他饿了。谁饿了？李伟。" */
    {6, NEED_ANY, "{giver} <gives> {np} ，/. 因为/f {cause+ask} 。/. {ask} ？/. {answer} 。/."},
    /* "王芳告诉李强，她会把苹果送给张伟，因为他饿了。" */
    {4, NEED_ANY,
     "{giver} 告诉/v {third} ，/. $S 会/f [?dative 给/f {receiver} {past} {np}"
     " | 把/f {noun} {past} {receiver}] <because> 。/."},
    /* "李伟从王芳那里得到了一个苹果，因为他饿了。" */
    {5, NEED_ANY, "{receiver} 从/f {giver} 那里/f 得到/v 了/f {np} <because> 。/."},
    /* "苹果被王芳送给了李伟，因为他饿了。" / "苹果是王芳给李伟买的，..." */
    {4, NEED_ANY,
     "{noun} [?dative 是/v {giver} 给/f {receiver} {past} 的/f"
     " | 被/f {giver} {past} 了/f {receiver}] <because> 。/."},
    /* "王芳想送给李伟一个苹果，因为他饿了。" */
    {3, NEED_ANY, "{giver} 想/v [?dative 给/f {receiver} {past} | {past} {receiver}] {np} <because> 。/."},
    /* "王芳给了李伟一个苹果。他饿了。" */
    {4, NEED_ANY, "{giver} <gives> {np} 。/. {cause} 。/."},
    /* "王芳给了李伟一个苹果，因为她的苹果太多了，而且他饿了。" */
    {4, NEED_ANY, "{giver} <gives> {np} ，/. 因为/f {cause} ，/. 而且/f {cause:other} 。/."},
    /* "李伟饿了，王芳就给了他一个苹果。" */
    {4, NEED_ANY, "{cause:receiver+subject=name} ，/. {giver} 就/f <gives_him> {np} 。/."},
};

/* ---- the text builder ------------------------------------------------------
 * Appends words to the text and records each one's span and labels.  An
 * allocation failure (or a flaw in the markup) is remembered in g->err and
 * checked once a sentence. */

typedef struct person {
    char name[32];
    int gender, role;
    int64_t last; /* index of the latest mention of the name, -1 before it */
} person;

typedef struct objnp {
    const noun *n;
    int definite;
    int64_t noun_word; /* index of the noun, -1 before it is emitted */
} objnp;

typedef struct language language;

typedef struct gen {
    const language *L;
    ffn_rng r;
    char *text;
    size_t len, cap;
    ffn_word *words;
    int64_t n_words, cap_words;
    int64_t sentence;
    int line_start, cap_next;
    ffn_status err;
} gen;

/* Noun-phrase forms, from {np:...}. */
enum { DET_ANY = 0, DET_NO_POSSESSIVE = 1, DET_THE = 2, DET_RELATIVE = 3 };

typedef struct sentence sentence;

/* Everything one language brings: its words, its templates, its pronouns
 * and how it builds the object's noun phrase. */
struct language {
    int spaced; /* words separated by spaces, sentences capitalised (en) */
    const char *const *female, *const *male, *const *surnames;
    int64_t n_female, n_male, n_surnames;
    const noun *nouns;
    int64_t n_nouns;
    const adjective *adjectives;
    int64_t n_adjectives;
    const verb *verbs;
    int64_t n_verbs;
    const cause *giver_causes, *receiver_causes;
    int64_t n_giver_causes, n_receiver_causes;
    const followup *followups;
    int64_t n_followups;
    const char *const *relatives, *const *object_relatives, *const *adjuncts;
    int64_t n_relatives, n_object_relatives, n_adjuncts;
    const fragment *fragments;
    int64_t n_fragments;
    const sentence_template *templates;
    int64_t n_templates;
    const char *pronouns[2][4]; /* [male][S O P Q] */
    const char *who, *it, *one; /* $W and {ask}; $I definite and not (one: NULL) */
    void (*np)(sentence *s, int det);
};

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) c *= 2;
    size_t bytes;
    if (ffn_mul_size(c, elem, &bytes)) return 1;
    void *q = realloc(*p, bytes);
    if (!q) return 1;
    *p = q;
    *cap = c;
    return 0;
}

static void put_bytes(gen *g, const char *s, size_t n) {
    if (g->err) return;
    if (grow((void **)&g->text, &g->cap, g->len + n + 1, 1)) {
        g->err = ffn_error(FFN_ERR_NOMEM, "corpus: text of %zu bytes", g->len + n);
        return;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
}

/* Emit the n bytes at w as one word; returns its index (or -1 after a
 * failure). */
static int64_t emit_n(gen *g, const char *w, size_t n, int cls, int gender, int role, int64_t ref) {
    if (g->err) return -1;
    if (g->L->spaced && !g->line_start && cls != FFN_WORD_PUNCT) put_bytes(g, " ", 1);
    size_t at = g->len;
    put_bytes(g, w, n);
    if (g->err) return -1;
    if (g->cap_next && g->L->spaced && g->text[at] >= 'a' && g->text[at] <= 'z')
        g->text[at] = (char)(g->text[at] - 'a' + 'A');
    size_t cap = (size_t)g->cap_words;
    if (grow((void **)&g->words, &cap, (size_t)g->n_words + 1, sizeof(ffn_word))) {
        g->err = ffn_error(FFN_ERR_NOMEM, "corpus: %lld words", (long long)g->n_words);
        return -1;
    }
    g->cap_words = (int64_t)cap;
    /* zero the padding too, so equal corpora compare equal byte for byte */
    ffn_word *x = &g->words[g->n_words];
    memset(x, 0, sizeof *x);
    x->offset = (int64_t)at;
    x->length = (int64_t)n;
    x->sentence = g->sentence;
    x->ref = ref;
    x->cls = (int8_t)cls;
    x->gender = (int8_t)gender;
    x->role = (int8_t)role;
    g->line_start = 0;
    g->cap_next = cls == FFN_WORD_PUNCT && n == 1 && (w[0] == '.' || w[0] == '?');
    return g->n_words++;
}

static int64_t emit(gen *g, const char *w, int cls, int gender, int role, int64_t ref) {
    return emit_n(g, w, strlen(w), cls, gender, role, ref);
}

static void end_line(gen *g) {
    put_bytes(g, "\n", 1);
    g->sentence++;
    g->line_start = 1;
    g->cap_next = 1;
}

static void word(gen *g, const char *w, int cls) { emit(g, w, cls, FFN_GENDER_NONE, FFN_ROLE_NONE, -1); }

static void name(gen *g, person *p) {
    int64_t i = emit(g, p->name, FFN_WORD_NAME, p->gender, p->role, -1);
    if (i >= 0) p->last = i;
}

/* A pronoun of p: form S subject, O object, P possessive determiner, Q
 * possessive pronoun. */
static void pronoun(gen *g, const person *p, char form) {
    int f = form == 'S' ? 0 : form == 'O' ? 1 : form == 'P' ? 2 : 3;
    emit(g, g->L->pronouns[p->gender == FFN_GENDER_MALE][f], FFN_WORD_PRONOUN, p->gender, p->role,
         p->last);
}

/* ---- choosing people, objects, verbs, causes ------------------------------ */

static void pick_person(gen *g, person *p, int role, const person *a, const person *b,
                        int gender) {
    const language *L = g->L;
    for (;;) {
        p->gender = gender ? gender : rng_pct(&g->r, 50) ? FFN_GENDER_FEMALE : FFN_GENDER_MALE;
        int female = p->gender == FFN_GENDER_FEMALE;
        const char *surname = L->surnames ? L->surnames[ffn_rng_below(&g->r, (uint64_t)L->n_surnames)] : "";
        const char *given = female ? L->female[ffn_rng_below(&g->r, (uint64_t)L->n_female)]
                                   : L->male[ffn_rng_below(&g->r, (uint64_t)L->n_male)];
        snprintf(p->name, sizeof p->name, "%s%s", surname, given);
        if ((!a || strcmp(a->name, p->name)) && (!b || strcmp(b->name, p->name))) break;
    }
    p->role = role;
    p->last = -1;
}

typedef struct scene {
    person giver, receiver, third;
    const noun *obj;
    const verb *verb;
} scene;

static const verb *pick_verb(gen *g, const noun *o, int need) {
    const verb *list = g->L->verbs;
    for (int tries = 0; tries < 1000; tries++) {
        const verb *v = &list[ffn_rng_below(&g->r, (uint64_t)g->L->n_verbs)];
        if (!(v->cats & o->cat)) continue;
        if ((need & NEED_DATIVE) && !v->dative) continue;
        if ((need & NEED_TO) && strcmp(v->prep, "to")) continue;
        if ((need & NEED_ZH_KIND0) && v->dative) continue;
        return v;
    }
    return &list[0]; /* "gave" / "给": fits everything */
}

static void new_scene(gen *g, scene *sc, int need) {
    pick_person(g, &sc->giver, FFN_ROLE_GIVER, NULL, NULL, 0);
    pick_person(g, &sc->receiver, FFN_ROLE_RECEIVER, &sc->giver, NULL, 0);
    int other = sc->giver.gender == FFN_GENDER_FEMALE ? FFN_GENDER_MALE : FFN_GENDER_FEMALE;
    pick_person(g, &sc->third, FFN_ROLE_OTHER, &sc->giver, &sc->receiver, other);
    sc->obj = &g->L->nouns[ffn_rng_below(&g->r, (uint64_t)g->L->n_nouns)];
    sc->verb = pick_verb(g, sc->obj, need);
}

static int starts_with_subject(const char *phrase) { return phrase[0] == '$' && phrase[1] == 'S'; }

/* Whether a phrase mentions the other person ($o, $p, $q, $s). */
static int mentions_other(const char *phrase) {
    for (const char *p = strchr(phrase, '$'); p; p = strchr(p + 1, '$'))
        if (p[1] >= 'a' && p[1] <= 'z') return 1;
    return 0;
}

/* CAUSE_SUBJECT: the phrase starts with $S and does not mention the other
 * person, so it can open a sentence with a name ("When John was hungry")
 * without a pronoun that points forward to a name not yet said. */
enum { CAUSE_ANY = 0, CAUSE_SUBJECT = 1, CAUSE_ASK = 2 };

static const cause *pick_cause(gen *g, int role, int cat, int need) {
    int giver = role == FFN_ROLE_GIVER;
    const cause *list = giver ? g->L->giver_causes : g->L->receiver_causes;
    int64_t n = giver ? g->L->n_giver_causes : g->L->n_receiver_causes;
    for (int tries = 0; tries < 10000; tries++) {
        const cause *c = &list[ffn_rng_below(&g->r, (uint64_t)n)];
        if (!(c->cats & cat)) continue;
        if ((need & CAUSE_SUBJECT) && (!starts_with_subject(c->phrase) || mentions_other(c->phrase)))
            continue;
        if ((need & CAUSE_ASK) && !c->ask) continue;
        return c;
    }
    return &list[0];
}

static const followup *pick_followup(gen *g, int cat) {
    int want_receiver = rng_pct(&g->r, 70);
    for (int tries = 0; tries < 1000; tries++) {
        const followup *c = &g->L->followups[ffn_rng_below(&g->r, (uint64_t)g->L->n_followups)];
        if ((c->cats & cat) && c->receiver == want_receiver) return c;
    }
    return &g->L->followups[0];
}

static const adjective *pick_adjective(gen *g, int cat) {
    for (int tries = 0; tries < 1000; tries++) {
        const adjective *a = &g->L->adjectives[ffn_rng_below(&g->r, (uint64_t)g->L->n_adjectives)];
        if (a->cats & cat) return a;
    }
    return &g->L->adjectives[0];
}

/* ---- the engine ---------------------------------------------------------------
 * One sentence: its scene, the object's noun phrase, and the latest cause
 * (for {ask}, {answer}, {aux}).  `render` walks the markup; a token that
 * chooses or picks draws from the generator where it stands. */

struct sentence {
    gen *g;
    scene sc;
    objnp np;
    const cause *said;
    int said_role;
};

/* How a phrase's $S is said. */
enum { SUBJ_PRONOUN, SUBJ_NAME, SUBJ_ASK, SUBJ_RELATIVE };

static void render(sentence *s, const char *p, const char *end, person *self, person *other, int subj);

static void render_str(sentence *s, const char *p, person *self, person *other, int subj) {
    render(s, p, p + strlen(p), self, other, subj);
}

static void markup_error(gen *g, const char *what, const char *p, const char *end) {
    if (!g->err)
        g->err = ffn_error(FFN_ERR_INTERNAL, "corpus: template markup: %s at '%.*s'", what,
                           (int)(end - p > 40 ? 40 : end - p), p);
}

static int span_is(const char *p, const char *end, const char *s) {
    size_t n = strlen(s);
    return (size_t)(end - p) == n && !memcmp(p, s, n);
}

static person *person_of(sentence *s, int role) {
    return role == FFN_ROLE_GIVER ? &s->sc.giver : &s->sc.receiver;
}

static person *other_of(sentence *s, int role) {
    return role == FFN_ROLE_GIVER ? &s->sc.receiver : &s->sc.giver;
}

static void placeholder(sentence *s, char c, person *self, person *other, int subj) {
    gen *g = s->g;
    if (c == 'S' && subj == SUBJ_NAME) name(g, self);
    else if (c == 'S' && subj == SUBJ_ASK) word(g, g->L->who, FFN_WORD_FUNCTION);
    else if ((c == 'S' && subj == SUBJ_RELATIVE) || c == 'W')
        emit(g, g->L->who, FFN_WORD_PRONOUN, self->gender, self->role, self->last);
    else if (c == 'S' || c == 'O' || c == 'P' || c == 'Q') pronoun(g, self, c);
    else if (c == 's' || c == 'o' || c == 'p' || c == 'q') pronoun(g, other, (char)(c - 32));
    else if (c == 'I') {
        if (s->np.definite || !g->L->one) emit(g, g->L->it, FFN_WORD_PRONOUN, 0, 0, s->np.noun_word);
        else word(g, g->L->one, FFN_WORD_FUNCTION);
    } else if (c == 'N') word(g, s->np.n->word, FFN_WORD_OBJECT);
    else if (c == 'M') word(g, s->np.n->measure, FFN_WORD_FUNCTION);
    else {
        char t[3] = {'$', c, 0};
        markup_error(g, "unknown placeholder", t, t + 2);
    }
}

/* {cause:ROLE+FLAGS=SUBJECT} (see the markup above). */
static void say_cause(sentence *s, const char *p, const char *end) {
    gen *g = s->g;
    int role = -1, need = CAUSE_ANY, subj = SUBJ_PRONOUN;
    while (p < end) {
        const char *q = p + 1;
        while (q < end && *q != ':' && *q != '+' && *q != '=') q++;
        if (*p == ':' && span_is(p + 1, q, "receiver")) role = FFN_ROLE_RECEIVER;
        else if (*p == ':' && span_is(p + 1, q, "giver")) role = FFN_ROLE_GIVER;
        else if (*p == ':' && span_is(p + 1, q, "other"))
            role = s->said_role == FFN_ROLE_GIVER ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER;
        else if (*p == '+' && span_is(p + 1, q, "subject")) need |= CAUSE_SUBJECT;
        else if (*p == '+' && span_is(p + 1, q, "ask")) need |= CAUSE_ASK;
        else if (*p == '=' && span_is(p + 1, q, "name")) subj = SUBJ_NAME;
        else if (*p == '=' && span_is(p + 1, q, "who")) subj = SUBJ_RELATIVE;
        else { markup_error(g, "unknown cause option", p, end); return; }
        p = q;
    }
    if (role < 0) role = rng_pct(&g->r, 55) ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER;
    s->said = pick_cause(g, role, s->sc.obj->cat, need);
    s->said_role = role;
    render_str(s, s->said->phrase, person_of(s, role), other_of(s, role), subj);
}

/* Say a phrase picked from a list, about the giver. */
static void say_pick(sentence *s, const char *const *list, int64_t n) {
    const char *phrase = list[ffn_rng_below(&s->g->r, (uint64_t)n)];
    render_str(s, phrase, &s->sc.giver, &s->sc.receiver, SUBJ_PRONOUN);
}

/* {slot}: p..end is the slot's text between the braces. */
static void say_slot(sentence *s, const char *p, const char *end) {
    gen *g = s->g;
    const language *L = g->L;
    scene *sc = &s->sc;
    const char *arg = p;
    while (arg < end && *arg != ':' && *arg != '+' && *arg != '=') arg++;
    if (span_is(p, arg, "cause")) {
        say_cause(s, arg, end);
        return;
    }
    if (span_is(p, arg, "np")) {
        int det = span_is(p, end, "np") ? DET_ANY
                : span_is(p, end, "np:the") ? DET_THE
                : span_is(p, end, "np:nopossessive") ? DET_NO_POSSESSIVE
                : span_is(p, end, "np:relative") ? DET_RELATIVE : -1;
        if (det < 0) { markup_error(g, "unknown noun phrase", p, end); return; }
        L->np(s, det);
        return;
    }
    if (span_is(p, end, "giver")) name(g, &sc->giver);
    else if (span_is(p, end, "receiver")) name(g, &sc->receiver);
    else if (span_is(p, end, "third")) name(g, &sc->third);
    else if (span_is(p, end, "past")) word(g, sc->verb->past, FFN_WORD_VERB);
    else if (span_is(p, end, "base")) word(g, sc->verb->base, FFN_WORD_VERB);
    else if (span_is(p, end, "part")) word(g, sc->verb->part, FFN_WORD_VERB);
    else if (span_is(p, end, "prep")) word(g, sc->verb->prep, FFN_WORD_FUNCTION);
    else if (span_is(p, end, "noun")) { /* the bare, definite noun: 把苹果, 苹果被 */
        s->np.definite = 1;
        s->np.noun_word = emit(g, sc->obj->word, FFN_WORD_OBJECT, 0, 0, -1);
    } else if (span_is(p, end, "ask") && s->said)
        render_str(s, s->said->phrase, person_of(s, s->said_role), other_of(s, s->said_role), SUBJ_ASK);
    else if (span_is(p, end, "answer") && s->said) name(g, person_of(s, s->said_role));
    else if (span_is(p, end, "aux") && s->said)
        word(g, s->said->ask == 'w' ? "was" : s->said->ask == 'h' ? "had" : "did", FFN_WORD_FUNCTION);
    else if (span_is(p, end, "followup")) {
        const followup *f = pick_followup(g, sc->obj->cat);
        int role = f->receiver ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER;
        render_str(s, f->phrase, person_of(s, role), other_of(s, role), SUBJ_PRONOUN);
    } else if (span_is(p, end, "adjunct")) say_pick(s, L->adjuncts, L->n_adjuncts);
    else if (span_is(p, end, "relative")) say_pick(s, L->relatives, L->n_relatives);
    else if (span_is(p, end, "object_relative")) say_pick(s, L->object_relatives, L->n_object_relatives);
    else markup_error(g, "unknown slot", p, end);
}

static const struct {
    const char *name;
    int cat;
} category_names[] = {
    {"food", C_FOOD}, {"drink", C_DRINK}, {"read", C_READ}, {"wear", C_WEAR},
    {"tool", C_TOOL}, {"toy", C_TOY},     {"thing", C_THING},
};

/* Whether a condition of [?c A | B] holds. */
static int holds(sentence *s, const char *p, const char *end) {
    if (span_is(p, end, "dative")) return s->sc.verb->dative != 0;
    int cats = 0;
    while (p < end) {
        const char *q = memchr(p, ',', (size_t)(end - p));
        if (!q) q = end;
        int found = 0;
        for (int64_t i = 0; i < COUNT(category_names); i++)
            if (span_is(p, q, category_names[i].name)) cats |= found = category_names[i].cat;
        if (!found) markup_error(s->g, "unknown condition", p, end);
        p = q < end ? q + 1 : q;
    }
    return (s->sc.obj->cat & cats) != 0;
}

/* [ ... ]: p..end is the text between the brackets. */
static void choose(sentence *s, const char *p, const char *end, person *self, person *other, int subj) {
    enum { MAX_ALTS = 8 };
    const char *alt[MAX_ALTS + 1];
    int n = 0, depth = 0;
    alt[n++] = p;
    for (const char *q = p; q < end; q++) {
        if (*q == '[') depth++;
        else if (*q == ']') depth--;
        else if (*q == '|' && depth == 0) {
            if (n == MAX_ALTS) { markup_error(s->g, "too many alternatives", p, end); return; }
            alt[n++] = q + 1;
        }
    }
    alt[n] = end + 1; /* alternative i is alt[i] .. alt[i + 1] - 1 */
    int pick = 0;
    const char *from;
    while (*p == ' ') p++;
    if (*p == '?') {
        const char *c = p + 1, *c_end = c;
        while (c_end < end && *c_end != ' ') c_end++;
        if (n != 2) { markup_error(s->g, "a condition wants two alternatives", p, end); return; }
        pick = holds(s, c, c_end) ? 0 : 1;
        from = pick == 0 ? c_end : alt[1];
    } else {
        int64_t weight[MAX_ALTS], total = 0;
        const char *after[MAX_ALTS];
        for (int i = 0; i < n; i++) {
            const char *q = alt[i];
            while (*q == ' ') q++;
            weight[i] = 0;
            if (*q < '0' || *q > '9') { markup_error(s->g, "an alternative without a weight", q, end); return; }
            while (*q >= '0' && *q <= '9') weight[i] = weight[i] * 10 + (*q++ - '0');
            after[i] = q;
            total += weight[i];
        }
        int64_t r = (int64_t)ffn_rng_below(&s->g->r, (uint64_t)total);
        while (r >= weight[pick]) r -= weight[pick++];
        from = after[pick];
    }
    render(s, from, alt[pick + 1] - 1, self, other, subj);
}

/* The end of a bracketed group that starts at p (p points at `open`). */
static const char *closing(const char *p, const char *end, char open, char close) {
    int depth = 0;
    for (; p < end; p++) {
        if (*p == open) depth++;
        else if (*p == close && --depth == 0) return p;
    }
    return NULL;
}

static void render(sentence *s, const char *p, const char *end, person *self, person *other, int subj) {
    gen *g = s->g;
    while (p < end && !g->err) {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*p == '[' || *p == '{' || *p == '<') {
            char close = *p == '[' ? ']' : *p == '{' ? '}' : '>';
            const char *q = closing(p, end, *p, close);
            if (!q) { markup_error(g, "unclosed group", p, end); return; }
            if (*p == '[') choose(s, p + 1, q, self, other, subj);
            else if (*p == '{') say_slot(s, p + 1, q);
            else {
                int64_t i = 0;
                while (i < g->L->n_fragments && !span_is(p + 1, q, g->L->fragments[i].name)) i++;
                if (i == g->L->n_fragments) { markup_error(g, "unknown fragment", p, end); return; }
                render_str(s, g->L->fragments[i].text, self, other, subj);
            }
            p = q + 1;
            continue;
        }
        if (*p == '$') {
            if (p + 1 >= end) { markup_error(g, "a lone $", p, end); return; }
            placeholder(s, p[1], self, other, subj);
            p += 2;
            continue;
        }
        const char *q = p;
        while (q < end && *q != ' ') q++;
        const char *slash = q - 1;
        while (slash > p && *slash != '/') slash--;
        if (slash > p)
            emit_n(g, p, (size_t)(slash - p), facts_class_of(slash + 1 < q ? slash[1] : 0),
                   FFN_GENDER_NONE, FFN_ROLE_NONE, -1);
        else emit_n(g, p, (size_t)(q - p), FFN_WORD_FUNCTION, FFN_GENDER_NONE, FFN_ROLE_NONE, -1);
        p = q;
    }
}

/* ---- the object's noun phrase, per language ------------------------------- */

static int en_vowel_sound(const char *w) {
    if (!strncmp(w, "uni", 3) || !strncmp(w, "use", 3) || !strncmp(w, "uku", 3) || !strncmp(w, "eu", 2))
        return 0;
    return strchr("aeiou", w[0]) != NULL;
}

/* "an apple", "the red apple", "her book" (the giver's), "this apple". */
static void en_np(sentence *s, int det) {
    gen *g = s->g;
    objnp *np = &s->np;
    np->n = s->sc.obj;
    np->noun_word = -1;
    int r = (int)ffn_rng_below(&g->r, 100);
    if (det == DET_THE) r = 60;
    if (det == DET_NO_POSSESSIVE && r >= 75 && r < 88) r = 60;
    const adjective *adj = rng_pct(&g->r, 30) ? pick_adjective(g, np->n->cat) : NULL;
    const char *next = adj ? adj->word : np->n->word;
    np->definite = r >= 50;
    if (r < 50) word(g, en_vowel_sound(next) ? "an" : "a", FFN_WORD_FUNCTION);
    else if (r < 75) word(g, "the", FFN_WORD_FUNCTION);
    else if (r < 88) pronoun(g, &s->sc.giver, 'P');
    else word(g, r < 94 ? "this" : "that", FFN_WORD_FUNCTION);
    if (adj) word(g, adj->word, FFN_WORD_MODIFIER);
    np->noun_word = emit(g, np->n->word, FFN_WORD_OBJECT, 0, 0, -1);
}

/* "一个苹果", "一杯热茶"; DET_RELATIVE inserts an object relative
 * ("一个她刚买的苹果"). */
static void zh_np(sentence *s, int det) {
    gen *g = s->g;
    objnp *np = &s->np;
    np->n = s->sc.obj;
    np->definite = 0;
    np->noun_word = -1;
    word(g, "一", FFN_WORD_FUNCTION);
    word(g, np->n->measure, FFN_WORD_FUNCTION);
    if (det == DET_RELATIVE) say_pick(s, g->L->object_relatives, g->L->n_object_relatives);
    else if (rng_pct(&g->r, 25)) {
        const char *adj = pick_adjective(g, np->n->cat)->word;
        word(g, adj, FFN_WORD_MODIFIER);
        if (strlen(adj) > 3) word(g, "的", FFN_WORD_FUNCTION); /* 漂亮的, but 大 alone */
    }
    np->noun_word = emit(g, np->n->word, FFN_WORD_OBJECT, 0, 0, -1);
}

/* ---- the two languages ---------------------------------------------------- */

/* The tables of a language, by the prefix of their names (en_..., zh_...). */
#define TABLES(x)                                                                          \
    .female = x##_female, .male = x##_male, .n_female = COUNT(x##_female),                 \
    .n_male = COUNT(x##_male), .nouns = x##_nouns, .n_nouns = COUNT(x##_nouns),            \
    .adjectives = x##_adjectives, .n_adjectives = COUNT(x##_adjectives),                   \
    .verbs = x##_verbs, .n_verbs = COUNT(x##_verbs), .giver_causes = x##_giver_causes,     \
    .n_giver_causes = COUNT(x##_giver_causes), .receiver_causes = x##_receiver_causes,     \
    .n_receiver_causes = COUNT(x##_receiver_causes), .followups = x##_followups,           \
    .n_followups = COUNT(x##_followups), .relatives = x##_relatives,                       \
    .n_relatives = COUNT(x##_relatives), .object_relatives = x##_object_relatives,         \
    .n_object_relatives = COUNT(x##_object_relatives), .adjuncts = x##_adjuncts,           \
    .n_adjuncts = COUNT(x##_adjuncts), .fragments = x##_fragments,                         \
    .n_fragments = COUNT(x##_fragments), .templates = x##_templates,                       \
    .n_templates = COUNT(x##_templates), .np = x##_np

static const language english = {
    TABLES(en),
    .spaced = 1,
    .pronouns = {{"she", "her", "her", "hers"}, {"he", "him", "his", "his"}},
    .who = "who", .it = "it", .one = "one",
};

static const language chinese = {
    TABLES(zh),
    .spaced = 0,
    .surnames = zh_surnames, .n_surnames = COUNT(zh_surnames),
    .pronouns = {{"她", "她", "她的", "她的"}, {"他", "他", "他的", "他的"}},
    .who = "谁", .it = "它", .one = NULL,
};

static const language *language_of(ffn_lang lang) {
    return lang == FFN_LANG_EN || lang == FFN_LANG_FACTS ? &english
           : lang == FFN_LANG_ZH ? &chinese : NULL;
}

/* The facts corpus's lines: a trained statement of a fact (facts.c),
 * labelled word by word through the same builder. */
static void fact_word(const char *w, int cls, void *user) { word(user, w, cls); }

/* One sentence: a template drawn by weight, its scene, then its markup. */
static void say_sentence(gen *g, int total_weight) {
    const sentence_template *t = g->L->templates;
    int r = (int)ffn_rng_below(&g->r, (uint64_t)total_weight);
    while (r >= t->weight) r -= (t++)->weight;
    sentence s = {.g = g, .said_role = FFN_ROLE_RECEIVER};
    new_scene(g, &s.sc, t->need);
    s.np = (objnp){.n = s.sc.obj, .definite = 0, .noun_word = -1};
    render_str(&s, t->text, &s.sc.giver, &s.sc.receiver, SUBJ_PRONOUN);
}

/* ---- the public entry points ---------------------------------------------- */

const char *ffn_lang_name(ffn_lang lang) {
    return lang == FFN_LANG_ZH ? "zh" : lang == FFN_LANG_FACTS ? "facts" : "en";
}

ffn_status ffn_lang_parse(const char *s, ffn_lang *out) {
    if (!s || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_lang_parse: NULL argument");
    if (!strcmp(s, "en")) *out = FFN_LANG_EN;
    else if (!strcmp(s, "zh")) *out = FFN_LANG_ZH;
    else if (!strcmp(s, "facts")) *out = FFN_LANG_FACTS;
    else return ffn_error(FFN_ERR_CONFIG, "lang: unknown value '%s' (expected en, zh or facts)", s);
    return FFN_OK;
}

const char *ffn_word_class_name(ffn_word_class cls) {
    static const char *const names[] = {[FFN_WORD_NAME] = "name", [FFN_WORD_PRONOUN] = "pronoun",
        [FFN_WORD_OBJECT] = "object", [FFN_WORD_VERB] = "verb", [FFN_WORD_FUNCTION] = "function",
        [FFN_WORD_MODIFIER] = "modifier", [FFN_WORD_PUNCT] = "punct", [FFN_WORD_SPACE] = "space"};
    return FFN_ENUM_NAME(names, cls, "?");
}

void ffn_corpus_free(ffn_corpus *corpus) {
    if (!corpus) return;
    free(corpus->text);
    free(corpus->words);
    free(corpus);
}

ffn_status ffn_corpus_generate(ffn_lang lang, uint64_t seed, int64_t n_sentences,
                               ffn_corpus **out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_corpus_generate: out is NULL");
    *out = NULL;
    if (lang != FFN_LANG_EN && lang != FFN_LANG_ZH && lang != FFN_LANG_FACTS)
        return ffn_error(FFN_ERR_INVALID_ARG, "corpus: unknown language %d", (int)lang);
    if (n_sentences < 1 || n_sentences > 10000000)
        return ffn_error(FFN_ERR_CONFIG, "corpus: sentences: expected 1 .. 10000000, got %lld",
                         (long long)n_sentences);
    gen g = {.L = language_of(lang), .line_start = 1, .cap_next = 1};
    ffn_rng_seed(&g.r, seed);
    ffn_facts *facts = NULL;
    ffn_rng fact_r;
    if (lang == FFN_LANG_FACTS) {
        ffn_status st = ffn_facts_generate(FFN_FACTS_DEFAULT, seed, &facts);
        if (st) return st;
        ffn_rng_seed(&fact_r, seed ^ 0x5f66616374735fULL);
    }
    int total = 0;
    for (int64_t i = 0; i < g.L->n_templates; i++) total += g.L->templates[i].weight;
    for (int64_t s = 0; s < n_sentences && !g.err; s++) {
        /* facts: half the lines state a fact, drawn from their own stream */
        if (facts && ffn_rng_below(&fact_r, 2)) facts_render_statement(facts, &fact_r, fact_word, &g);
        else say_sentence(&g, total);
        end_line(&g);
    }
    ffn_facts_free(facts);
    ffn_corpus *c = g.err ? NULL : calloc(1, sizeof *c);
    if (!c) {
        free(g.text);
        free(g.words);
        return g.err ? g.err : ffn_error(FFN_ERR_NOMEM, "corpus");
    }
    c->lang = lang;
    c->seed = seed;
    c->n_sentences = n_sentences;
    c->text = g.text;
    c->n_bytes = (int64_t)g.len;
    c->words = g.words;
    c->n_words = g.n_words;
    *out = c;
    return FFN_OK;
}

int64_t ffn_corpus_word_at(const ffn_corpus *c, int64_t offset, int64_t length) {
    if (!c || length < 1 || c->n_words == 0) return -1;
    /* the first word ending after `offset` */
    int64_t lo = 0, hi = c->n_words;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (c->words[mid].offset + c->words[mid].length <= offset) lo = mid + 1;
        else hi = mid;
    }
    if (lo == c->n_words || c->words[lo].offset >= offset + length) return -1;
    return lo;
}

ffn_status ffn_corpus_get_inventory(ffn_lang lang, ffn_corpus_inventory *out) {
    if (!out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_corpus_get_inventory: out is NULL");
    const language *L = language_of(lang);
    if (!L) return ffn_error(FFN_ERR_INVALID_ARG, "corpus: unknown language %d", (int)lang);
    *out = (ffn_corpus_inventory){L->n_female, L->n_male, L->n_surnames, L->n_nouns, L->n_verbs,
                                  L->n_templates, L->n_giver_causes, L->n_receiver_causes,
                                  L->n_adjectives};
    return FFN_OK;
}
