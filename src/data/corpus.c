/* corpus.c -- the built-in corpus: a generated language about giving, with
 * pronouns that must be resolved, in English and Chinese.
 *
 * Reads top to bottom: the PRNG, the vocabularies (English then Chinese),
 * the text builder that labels every word, the phrase renderer, the
 * sentence templates of each language, then the public entry points.
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
 * arithmetic only, no locale, so a seed gives the same bytes everywhere. */
#include "ffn/data.h"
#include "base/common.h"

#include <stdio.h>
#include <string.h>

#include "base/rng.h"

/* ---- PRNG (src/base/rng.h) ---------------------------------------------------- */

/* 1 with probability pct/100. */
static int rng_pct(ffn_rng *r, int pct) { return (int)ffn_rng_below(r, 100) < pct; }

#define COUNT(a) ((int64_t)(sizeof(a) / sizeof((a)[0])))
#define PICK(r, a) ((a)[ffn_rng_below((r), (uint64_t)COUNT(a))])

/* ---- vocabularies ---------------------------------------------------------
 * Object categories, as bits, so verbs and causes can say where they fit. */
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
 * "X把O V了Y"; kind 1 is "X给Y V了一M O" (买, 倒, 做). */
typedef struct verb {
    const char *past, *base, *part;
    int dative;
    const char *prep;
    int cats;
} verb;

/* A cause (or a follow-up) in phrase markup: words separated by single
 * spaces, each "word/c" with c one of n p o v f m . (name, pronoun, object,
 * verb, function, modifier, punct), or a placeholder:
 *   $S $O $P $Q  this person: subject, object, possessive determiner,
 *                possessive pronoun (he him his his / 他 他 他的)
 *   $s $o $p $q  the other person, the same forms
 *   $I           the object: "it" when definite, "one" when not (en)
 *   $N $M        the object's noun, its measure word (zh)
 * `ask` (en): the auxiliary that answers "Who <phrase>?" ('w' was, 'h' had,
 * 'd' did), 0 when the phrase does not start with $S or cannot be asked. */
typedef struct cause {
    const char *phrase;
    int cats;
    char ask;
} cause;

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

/* Adjectives before the object, by the categories they suit. */
typedef struct adjective {
    const char *word;
    int cats;
} adjective;

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

/* What happened next: this person = the receiver (receiver = 1) or giver. */
typedef struct followup {
    const char *phrase;
    int cats, receiver;
} followup;

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

/* ---- the text builder ------------------------------------------------------
 * Appends words to the text and records each one's span and labels.  An
 * allocation failure is remembered in g->err and checked once a sentence. */

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

typedef struct gen {
    ffn_lang lang;
    ffn_rng r;
    char *text;
    size_t len, cap;
    ffn_word *words;
    int64_t n_words, cap_words;
    int64_t sentence;
    int line_start, cap_next;
    ffn_status err;
} gen;

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

/* Emit one word; returns its index (or -1 after an allocation failure). */
static int64_t emit(gen *g, const char *w, int cls, int gender, int role, int64_t ref) {
    if (g->err) return -1;
    if (g->lang == FFN_LANG_EN && !g->line_start && cls != FFN_WORD_PUNCT) put_bytes(g, " ", 1);
    size_t n = strlen(w), at = g->len;
    put_bytes(g, w, n);
    if (g->err) return -1;
    if (g->cap_next && g->lang == FFN_LANG_EN && g->text[at] >= 'a' && g->text[at] <= 'z')
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
    g->cap_next = cls == FFN_WORD_PUNCT && (!strcmp(w, ".") || !strcmp(w, "?"));
    return g->n_words++;
}

static void end_line(gen *g) {
    put_bytes(g, "\n", 1);
    g->sentence++;
    g->line_start = 1;
    g->cap_next = 1;
}

static void word(gen *g, const char *w, int cls) { emit(g, w, cls, FFN_GENDER_NONE, FFN_ROLE_NONE, -1); }
static void punct(gen *g, const char *w) { word(g, w, FFN_WORD_PUNCT); }

static void name(gen *g, person *p) {
    int64_t i = emit(g, p->name, FFN_WORD_NAME, p->gender, p->role, -1);
    if (i >= 0) p->last = i;
}

/* Pronoun forms: S subject, O object, P possessive determiner, Q possessive
 * pronoun. */
static void pronoun(gen *g, const person *p, char form) {
    static const char *const en[2][4] = {{"she", "her", "her", "hers"}, {"he", "him", "his", "his"}};
    static const char *const zh[2][4] = {{"她", "她", "她的", "她的"}, {"他", "他", "他的", "他的"}};
    int m = p->gender == FFN_GENDER_MALE;
    int f = form == 'S' ? 0 : form == 'O' ? 1 : form == 'P' ? 2 : 3;
    const char *w = g->lang == FFN_LANG_EN ? en[m][f] : zh[m][f];
    emit(g, w, FFN_WORD_PRONOUN, p->gender, p->role, p->last);
}

static int class_of(char c) {
    switch (c) {
    case 'n': return FFN_WORD_NAME;
    case 'p': return FFN_WORD_PRONOUN;
    case 'o': return FFN_WORD_OBJECT;
    case 'v': return FFN_WORD_VERB;
    case 'm': return FFN_WORD_MODIFIER;
    case '.': return FFN_WORD_PUNCT;
    default: return FFN_WORD_FUNCTION;
    }
}

/* How a phrase's $S is said. */
enum { SUBJ_PRONOUN, SUBJ_NAME, SUBJ_ASK, SUBJ_RELATIVE };

/* Render phrase markup (see `cause`) about `self`, with `other` the other
 * person and `obj` the object. */
static void render(gen *g, const char *phrase, person *self, person *other, objnp *obj,
                   int subj) {
    char buf[256];
    size_t n = strlen(phrase);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, phrase, n);
    buf[n] = '\0';
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (t[0] == '$') {
            char c = t[1];
            if (c == 'S' && subj == SUBJ_NAME) name(g, self);
            else if (c == 'S' && subj == SUBJ_ASK) word(g, g->lang == FFN_LANG_EN ? "who" : "谁", FFN_WORD_FUNCTION);
            else if (c == 'S' && subj == SUBJ_RELATIVE)
                emit(g, "who", FFN_WORD_PRONOUN, self->gender, self->role, self->last);
            else if (c == 'S' || c == 'O' || c == 'P' || c == 'Q') pronoun(g, self, c);
            else if (c == 's' || c == 'o' || c == 'p' || c == 'q') pronoun(g, other, (char)(c - 32));
            else if (c == 'I') {
                if (g->lang == FFN_LANG_ZH) emit(g, "它", FFN_WORD_PRONOUN, 0, 0, obj->noun_word);
                else if (obj->definite) emit(g, "it", FFN_WORD_PRONOUN, 0, 0, obj->noun_word);
                else word(g, "one", FFN_WORD_FUNCTION);
            } else if (c == 'N') word(g, obj->n->word, FFN_WORD_OBJECT);
            else if (c == 'M') word(g, obj->n->measure, FFN_WORD_FUNCTION);
            continue;
        }
        char *slash = strrchr(t, '/');
        int cls = FFN_WORD_FUNCTION;
        if (slash && slash != t) {
            cls = class_of(slash[1]);
            *slash = '\0';
        }
        word(g, t, cls);
    }
}

static int starts_with_subject(const char *phrase) { return phrase[0] == '$' && phrase[1] == 'S'; }

/* Whether a phrase mentions the other person ($o, $p, $q, $s). */
static int mentions_other(const char *phrase) {
    for (const char *p = strchr(phrase, '$'); p; p = strchr(p + 1, '$'))
        if (p[1] >= 'a' && p[1] <= 'z') return 1;
    return 0;
}

/* ---- choosing people, objects, verbs, causes ------------------------------ */

static void pick_person(gen *g, person *p, int role, const person *a, const person *b,
                        int gender) {
    for (;;) {
        p->gender = gender ? gender : rng_pct(&g->r, 50) ? FFN_GENDER_FEMALE : FFN_GENDER_MALE;
        int female = p->gender == FFN_GENDER_FEMALE;
        if (g->lang == FFN_LANG_EN) {
            const char *n = female ? PICK(&g->r, en_female) : PICK(&g->r, en_male);
            snprintf(p->name, sizeof p->name, "%s", n);
        } else {
            const char *s = PICK(&g->r, zh_surnames);
            const char *n = female ? PICK(&g->r, zh_female) : PICK(&g->r, zh_male);
            snprintf(p->name, sizeof p->name, "%s%s", s, n);
        }
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

enum { NEED_ANY = 0, NEED_DATIVE = 1, NEED_TO = 2, NEED_ZH_KIND0 = 4 };

static const verb *pick_verb(gen *g, const noun *o, int need) {
    const verb *list = g->lang == FFN_LANG_EN ? en_verbs : zh_verbs;
    int64_t n = g->lang == FFN_LANG_EN ? COUNT(en_verbs) : COUNT(zh_verbs);
    for (int tries = 0; tries < 1000; tries++) {
        const verb *v = &list[ffn_rng_below(&g->r, (uint64_t)n)];
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
    sc->obj = g->lang == FFN_LANG_EN ? &PICK(&g->r, en_nouns) : &PICK(&g->r, zh_nouns);
    sc->verb = pick_verb(g, sc->obj, need);
}

/* CAUSE_SUBJECT: the phrase starts with $S and does not mention the other
 * person, so it can open a sentence with a name ("When John was hungry")
 * without a pronoun that points forward to a name not yet said. */
enum { CAUSE_ANY = 0, CAUSE_SUBJECT = 1, CAUSE_ASK = 2 };

static const cause *pick_from(gen *g, const cause *list, int64_t n, int cat, int need) {
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

static const cause *pick_cause(gen *g, int role, int cat, int need) {
    if (g->lang == FFN_LANG_EN)
        return role == FFN_ROLE_GIVER ? pick_from(g, en_giver_causes, COUNT(en_giver_causes), cat, need)
                                      : pick_from(g, en_receiver_causes, COUNT(en_receiver_causes), cat, need);
    return role == FFN_ROLE_GIVER ? pick_from(g, zh_giver_causes, COUNT(zh_giver_causes), cat, need)
                                  : pick_from(g, zh_receiver_causes, COUNT(zh_receiver_causes), cat, need);
}

/* Say a cause about `role` (the referent) with the right self and other. */
static const cause *say_cause(gen *g, scene *sc, objnp *np, int role, int need, int subj) {
    const cause *c = pick_cause(g, role, sc->obj->cat, need);
    person *self = role == FFN_ROLE_GIVER ? &sc->giver : &sc->receiver;
    person *other = role == FFN_ROLE_GIVER ? &sc->receiver : &sc->giver;
    render(g, c->phrase, self, other, np, subj);
    return c;
}

static int cause_role(gen *g) { return rng_pct(&g->r, 55) ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER; }

static void say_followup(gen *g, scene *sc, objnp *np) {
    const followup *list = g->lang == FFN_LANG_EN ? en_followups : zh_followups;
    int64_t n = g->lang == FFN_LANG_EN ? COUNT(en_followups) : COUNT(zh_followups);
    int want_receiver = rng_pct(&g->r, 70);
    const followup *f = &list[0];
    for (int tries = 0; tries < 1000; tries++) {
        const followup *c = &list[ffn_rng_below(&g->r, (uint64_t)n)];
        if ((c->cats & sc->obj->cat) && c->receiver == want_receiver) {
            f = c;
            break;
        }
    }
    person *self = f->receiver ? &sc->receiver : &sc->giver;
    person *other = f->receiver ? &sc->giver : &sc->receiver;
    render(g, f->phrase, self, other, np, SUBJ_PRONOUN);
}

/* ---- English templates ---------------------------------------------------- */

static int en_vowel_sound(const char *w) {
    if (!strncmp(w, "uni", 3) || !strncmp(w, "use", 3) || !strncmp(w, "uku", 3) || !strncmp(w, "eu", 2))
        return 0;
    return strchr("aeiou", w[0]) != NULL;
}

static const adjective *pick_adjective(gen *g, int cat) {
    const adjective *list = g->lang == FFN_LANG_EN ? en_adjectives : zh_adjectives;
    int64_t n = g->lang == FFN_LANG_EN ? COUNT(en_adjectives) : COUNT(zh_adjectives);
    for (int tries = 0; tries < 1000; tries++) {
        const adjective *a = &list[ffn_rng_below(&g->r, (uint64_t)n)];
        if (a->cats & cat) return a;
    }
    return &list[0];
}

enum { DET_ANY = 0, DET_NO_POSSESSIVE = 1, DET_THE = 2 };

/* The object's noun phrase: "an apple", "the red apple", "her book". */
static void en_np(gen *g, scene *sc, objnp *np, int det) {
    np->n = sc->obj;
    np->noun_word = -1;
    int r = (int)ffn_rng_below(&g->r, 100);
    if (det == DET_THE) r = 60;
    if (det == DET_NO_POSSESSIVE && r >= 75 && r < 88) r = 60;
    const adjective *adj = rng_pct(&g->r, 30) ? pick_adjective(g, sc->obj->cat) : NULL;
    const char *next = adj ? adj->word : sc->obj->word;
    np->definite = r >= 50;
    if (r < 50) word(g, en_vowel_sound(next) ? "an" : "a", FFN_WORD_FUNCTION);
    else if (r < 75) word(g, "the", FFN_WORD_FUNCTION);
    else if (r < 88) pronoun(g, &sc->giver, 'P');
    else word(g, r < 94 ? "this" : "that", FFN_WORD_FUNCTION);
    if (adj) word(g, adj->word, FFN_WORD_MODIFIER);
    int64_t i = emit(g, sc->obj->word, FFN_WORD_OBJECT, 0, 0, -1);
    np->noun_word = i;
}

/* "X gave Y an apple" or "X gave an apple to Y"; `subj` says X's form. */
static void en_give(gen *g, scene *sc, objnp *np, int subject_pronoun) {
    if (subject_pronoun) pronoun(g, &sc->giver, 'S');
    else name(g, &sc->giver);
    word(g, sc->verb->past, FFN_WORD_VERB);
    if (sc->verb->dative && rng_pct(&g->r, 60)) {
        name(g, &sc->receiver);
        en_np(g, sc, np, DET_ANY);
    } else {
        en_np(g, sc, np, DET_ANY);
        word(g, sc->verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc->receiver);
    }
}

static void en_because(gen *g, scene *sc, objnp *np) {
    word(g, "because", FFN_WORD_FUNCTION);
    say_cause(g, sc, np, cause_role(g), CAUSE_ANY, SUBJ_PRONOUN);
}

static void en_adjunct(gen *g) { render(g, PICK(&g->r, en_adjuncts), NULL, NULL, NULL, 0); }

/* T1, T2: the plain sentence, with an optional time or place. */
static void en_plain(gen *g, int prep_form) {
    scene sc;
    objnp np;
    new_scene(g, &sc, prep_form ? NEED_ANY : NEED_DATIVE);
    int adj = (int)ffn_rng_below(&g->r, 100);
    if (adj < 10) {
        en_adjunct(g);
        punct(g, ",");
    }
    name(g, &sc.giver);
    word(g, sc.verb->past, FFN_WORD_VERB);
    if (!prep_form) {
        name(g, &sc.receiver);
        en_np(g, &sc, &np, DET_ANY);
    } else {
        en_np(g, &sc, &np, DET_ANY);
        word(g, sc.verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    }
    if (adj >= 10 && adj < 25) en_adjunct(g);
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T3 "John was hungry, so Mary gave him an apple." and
 * T4 "When John was hungry, Mary gave him an apple." */
static void en_state_first(gen *g, int when) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_DATIVE);
    np.n = sc.obj;
    np.noun_word = -1;
    if (when) word(g, "when", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, FFN_ROLE_RECEIVER, CAUSE_SUBJECT, SUBJ_NAME);
    punct(g, ",");
    if (!when) word(g, "so", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    word(g, sc.verb->past, FFN_WORD_VERB);
    pronoun(g, &sc.receiver, 'O');
    en_np(g, &sc, &np, DET_ANY);
    punct(g, ".");
}

/* T5 "Since Mary had too many, she gave John an apple." */
static void en_since(gen *g) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ANY);
    np.n = sc.obj;
    np.noun_word = -1;
    word(g, "since", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, FFN_ROLE_GIVER, CAUSE_SUBJECT, SUBJ_NAME);
    punct(g, ",");
    en_give(g, &sc, &np, 1);
    punct(g, ".");
}

/* T6 "... because ..., and then he thanked her." and T7 without the cause. */
static void en_and_then(gen *g, int with_cause) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    en_give(g, &sc, &np, 0);
    if (with_cause) en_because(g, &sc, &np);
    punct(g, ",");
    word(g, "and", FFN_WORD_FUNCTION);
    word(g, "then", FFN_WORD_FUNCTION);
    say_followup(g, &sc, &np);
    punct(g, ".");
}

/* T8 "Mary, who lived next door, gave John an apple because he was hungry." */
static void en_relative(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    punct(g, ",");
    emit(g, "who", FFN_WORD_PRONOUN, sc.giver.gender, sc.giver.role, sc.giver.last);
    render(g, PICK(&g->r, en_relatives), &sc.giver, &sc.receiver, NULL, SUBJ_PRONOUN);
    punct(g, ",");
    word(g, sc.verb->past, FFN_WORD_VERB);
    if (sc.verb->dative) {
        name(g, &sc.receiver);
        en_np(g, &sc, &np, DET_ANY);
    } else {
        en_np(g, &sc, &np, DET_ANY);
        word(g, sc.verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    }
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T9 "Mary gave John the apple that she had bought at the market because ..." */
static void en_object_relative(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_DATIVE);
    name(g, &sc.giver);
    word(g, sc.verb->past, FFN_WORD_VERB);
    name(g, &sc.receiver);
    en_np(g, &sc, &np, DET_THE);
    word(g, "that", FFN_WORD_FUNCTION);
    render(g, PICK(&g->r, en_object_relatives), &sc.giver, &sc.receiver, &np, SUBJ_PRONOUN);
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T10 "Why did Mary give John the apple? Because he was hungry." */
static void en_why(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    word(g, "why", FFN_WORD_FUNCTION);
    word(g, "did", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    word(g, sc.verb->base, FFN_WORD_VERB);
    if (sc.verb->dative) {
        name(g, &sc.receiver);
        en_np(g, &sc, &np, DET_ANY);
    } else {
        en_np(g, &sc, &np, DET_ANY);
        word(g, sc.verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    }
    punct(g, "?");
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T11 "Mary gave John an apple because he was hungry. Who was hungry? John was." */
static void en_who(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    en_give(g, &sc, &np, 0);
    word(g, "because", FFN_WORD_FUNCTION);
    int role = cause_role(g);
    const cause *c = pick_cause(g, role, sc.obj->cat, CAUSE_ASK);
    person *self = role == FFN_ROLE_GIVER ? &sc.giver : &sc.receiver;
    person *other = role == FFN_ROLE_GIVER ? &sc.receiver : &sc.giver;
    render(g, c->phrase, self, other, &np, SUBJ_PRONOUN);
    punct(g, ".");
    render(g, c->phrase, self, other, &np, SUBJ_ASK);
    punct(g, "?");
    name(g, self);
    word(g, c->ask == 'w' ? "was" : c->ask == 'h' ? "had" : "did", FFN_WORD_FUNCTION);
    punct(g, ".");
}

/* T12 "Mary told Peter that she would give John the apple because ..." */
static void en_told(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "told", FFN_WORD_VERB);
    name(g, &sc.third);
    word(g, "that", FFN_WORD_FUNCTION);
    pronoun(g, &sc.giver, 'S');
    word(g, "would", FFN_WORD_FUNCTION);
    word(g, sc.verb->base, FFN_WORD_VERB);
    if (sc.verb->dative) {
        name(g, &sc.receiver);
        en_np(g, &sc, &np, DET_ANY);
    } else {
        en_np(g, &sc, &np, DET_ANY);
        word(g, sc.verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    }
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T13 "After Mary gave John the apple, he thanked her." */
static void en_after(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    word(g, "after", FFN_WORD_FUNCTION);
    en_give(g, &sc, &np, 0);
    punct(g, ",");
    say_followup(g, &sc, &np);
    punct(g, ".");
}

/* T14 "Mary asked John if he wanted an apple because he was hungry." */
static void en_asked(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "asked", FFN_WORD_VERB);
    name(g, &sc.receiver);
    word(g, "if", FFN_WORD_FUNCTION);
    pronoun(g, &sc.receiver, 'S');
    word(g, "wanted", FFN_WORD_VERB);
    en_np(g, &sc, &np, DET_ANY);
    word(g, "because", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, FFN_ROLE_RECEIVER, CAUSE_ANY, SUBJ_PRONOUN);
    punct(g, ".");
}

/* T15 "... because she had too many and because he was hungry." */
static void en_two_causes(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    en_give(g, &sc, &np, 0);
    int first = cause_role(g);
    word(g, "because", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, first, CAUSE_ANY, SUBJ_PRONOUN);
    word(g, "and", FFN_WORD_FUNCTION);
    word(g, "because", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, first == FFN_ROLE_GIVER ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER, CAUSE_ANY,
              SUBJ_PRONOUN);
    punct(g, ".");
}

/* T16 "Mary did not keep the apple; she gave it to John because ..." */
static void en_not_keep(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_TO);
    name(g, &sc.giver);
    word(g, "did", FFN_WORD_FUNCTION);
    word(g, "not", FFN_WORD_FUNCTION);
    word(g, "keep", FFN_WORD_VERB);
    en_np(g, &sc, &np, DET_THE);
    punct(g, ";");
    pronoun(g, &sc.giver, 'S');
    word(g, sc.verb->past, FFN_WORD_VERB);
    emit(g, "it", FFN_WORD_PRONOUN, 0, 0, np.noun_word);
    word(g, "to", FFN_WORD_FUNCTION);
    name(g, &sc.receiver);
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T17 "John got an apple from Mary because he was hungry." */
static void en_got_from(gen *g) {
    static const char *const receive[] = {"got", "received", "accepted", "took", "borrowed"};
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    const char *v = PICK(&g->r, receive);
    if (!strcmp(v, "borrowed") && (sc.obj->cat & (C_FOOD | C_DRINK))) v = "got";
    name(g, &sc.receiver);
    word(g, v, FFN_WORD_VERB);
    en_np(g, &sc, &np, DET_NO_POSSESSIVE);
    word(g, "from", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T18 "The apple was given to John by Mary because he was hungry." */
static void en_passive(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    en_np(g, &sc, &np, DET_THE);
    word(g, "was", FFN_WORD_FUNCTION);
    word(g, sc.verb->part, FFN_WORD_VERB);
    word(g, sc.verb->prep, FFN_WORD_FUNCTION);
    name(g, &sc.receiver);
    word(g, "by", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T19 "Mary wanted to give John an apple because he was hungry." */
static void en_wanted(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "wanted", FFN_WORD_VERB);
    word(g, "to", FFN_WORD_FUNCTION);
    word(g, sc.verb->base, FFN_WORD_VERB);
    if (sc.verb->dative) {
        name(g, &sc.receiver);
        en_np(g, &sc, &np, DET_ANY);
    } else {
        en_np(g, &sc, &np, DET_ANY);
        word(g, sc.verb->prep, FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    }
    en_because(g, &sc, &np);
    punct(g, ".");
}

/* T20 "Mary gave John an apple. He was hungry." */
static void en_two_sentences(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    en_give(g, &sc, &np, 0);
    punct(g, ".");
    say_cause(g, &sc, &np, cause_role(g), CAUSE_ANY, SUBJ_PRONOUN);
    punct(g, ".");
}

/* T21 "Mary gave an apple to John, who was hungry." */
static void en_who_relative(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, sc.verb->past, FFN_WORD_VERB);
    en_np(g, &sc, &np, DET_ANY);
    word(g, sc.verb->prep, FFN_WORD_FUNCTION);
    name(g, &sc.receiver);
    punct(g, ",");
    say_cause(g, &sc, &np, FFN_ROLE_RECEIVER, CAUSE_SUBJECT, SUBJ_RELATIVE);
    punct(g, ".");
}

typedef struct template_entry {
    void (*fn)(gen *g, int arg);
    int arg, weight;
} template_entry;

#define T0(f) static void f##_0(gen *g, int arg) { (void)arg; f(g); }
T0(en_since) T0(en_relative) T0(en_object_relative) T0(en_why) T0(en_who) T0(en_told)
T0(en_after) T0(en_asked) T0(en_two_causes) T0(en_not_keep) T0(en_got_from) T0(en_passive)
T0(en_wanted) T0(en_two_sentences) T0(en_who_relative)

static const template_entry en_templates[] = {
    {en_plain, 0, 14},          {en_plain, 1, 10},         {en_state_first, 0, 4},
    {en_state_first, 1, 4},     {en_since_0, 0, 4},        {en_and_then, 1, 5},
    {en_and_then, 0, 3},        {en_relative_0, 0, 5},     {en_object_relative_0, 0, 4},
    {en_why_0, 0, 5},           {en_who_0, 0, 6},          {en_told_0, 0, 4},
    {en_after_0, 0, 4},         {en_asked_0, 0, 3},        {en_two_causes_0, 0, 4},
    {en_not_keep_0, 0, 3},      {en_got_from_0, 0, 5},     {en_passive_0, 0, 4},
    {en_wanted_0, 0, 3},        {en_two_sentences_0, 0, 4}, {en_who_relative_0, 0, 3},
};

/* ---- Chinese templates -------------------------------------------------- */

static int zh_kind1(const scene *sc) { return sc->verb->dative != 0; }

/* "一个苹果", "一杯热茶"; `rel` inserts an object relative ("她刚买的"). */
static void zh_np(gen *g, scene *sc, objnp *np, int rel) {
    np->n = sc->obj;
    np->definite = 0;
    np->noun_word = -1;
    word(g, "一", FFN_WORD_FUNCTION);
    word(g, sc->obj->measure, FFN_WORD_FUNCTION);
    if (rel) render(g, PICK(&g->r, zh_object_relatives), &sc->giver, &sc->receiver, np, SUBJ_PRONOUN);
    else if (rng_pct(&g->r, 25)) {
        const char *adj = pick_adjective(g, sc->obj->cat)->word;
        word(g, adj, FFN_WORD_MODIFIER);
        if (strlen(adj) > 3) word(g, "的", FFN_WORD_FUNCTION); /* 漂亮的, but 大 alone */
    }
    np->noun_word = emit(g, sc->obj->word, FFN_WORD_OBJECT, 0, 0, -1);
}

static void zh_receiver(gen *g, scene *sc, int as_pronoun) {
    if (as_pronoun) pronoun(g, &sc->receiver, 'O');
    else name(g, &sc->receiver);
}

/* "X递给了Y一个苹果" (kind 0) or "X给Y买了一个苹果" (kind 1), from the
 * verb on: the subject is said by the caller. */
static void zh_give_rest(gen *g, scene *sc, objnp *np, int recv_pronoun, int rel) {
    if (!zh_kind1(sc)) {
        word(g, sc->verb->past, FFN_WORD_VERB);
        word(g, "了", FFN_WORD_FUNCTION);
        zh_receiver(g, sc, recv_pronoun);
    } else {
        word(g, "给", FFN_WORD_FUNCTION);
        zh_receiver(g, sc, recv_pronoun);
        word(g, sc->verb->past, FFN_WORD_VERB);
        word(g, "了", FFN_WORD_FUNCTION);
    }
    zh_np(g, sc, np, rel);
}

static void zh_because(gen *g, scene *sc, objnp *np) {
    punct(g, "，");
    word(g, "因为", FFN_WORD_FUNCTION);
    say_cause(g, sc, np, cause_role(g), CAUSE_ANY, SUBJ_PRONOUN);
}

static void zh_adjunct(gen *g) { render(g, PICK(&g->r, zh_adjuncts), NULL, NULL, NULL, 0); }

/* Z1 "王芳昨天给了李伟一个苹果，因为他饿了。" */
static void zh_plain(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    if (rng_pct(&g->r, 20)) zh_adjunct(g);
    zh_give_rest(g, &sc, &np, 0, 0);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z2 "王芳把苹果递给了李伟，因为他饿了。" */
static void zh_ba(gen *g) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ZH_KIND0);
    name(g, &sc.giver);
    word(g, "把", FFN_WORD_FUNCTION);
    if (rng_pct(&g->r, 20)) pronoun(g, &sc.giver, 'P');
    np.n = sc.obj;
    np.definite = 1;
    np.noun_word = emit(g, sc.obj->word, FFN_WORD_OBJECT, 0, 0, -1);
    word(g, sc.verb->past, FFN_WORD_VERB);
    word(g, "了", FFN_WORD_FUNCTION);
    name(g, &sc.receiver);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z3 "因为李伟饿了，所以王芳给了他一个苹果。" and
 * Z16 "李伟饿了，王芳就给了他一个苹果。" */
static void zh_state_first(gen *g, int jiu) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ANY);
    np.n = sc.obj;
    np.noun_word = -1;
    if (!jiu) word(g, "因为", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, FFN_ROLE_RECEIVER, CAUSE_SUBJECT, SUBJ_NAME);
    punct(g, "，");
    if (!jiu) word(g, "所以", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    if (jiu) word(g, "就", FFN_WORD_FUNCTION);
    zh_give_rest(g, &sc, &np, 1, 0);
    punct(g, "。");
}

/* Z4 "因为王芳已经吃饱了，所以她给了李伟一个苹果。" */
static void zh_so_giver(gen *g) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ANY);
    np.n = sc.obj;
    np.noun_word = -1;
    word(g, "因为", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, FFN_ROLE_GIVER, CAUSE_SUBJECT, SUBJ_NAME);
    punct(g, "，");
    word(g, "所以", FFN_WORD_FUNCTION);
    pronoun(g, &sc.giver, 'S');
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "。");
}

/* Z5 "王芳给了李伟一个苹果，然后他向她道谢。" */
static void zh_then(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "，");
    word(g, "然后", FFN_WORD_FUNCTION);
    say_followup(g, &sc, &np);
    punct(g, "。");
}

/* Z6 "住在隔壁的王芳给了李伟一个苹果，因为他饿了。" */
static void zh_relative(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    render(g, PICK(&g->r, zh_relatives), &sc.giver, &sc.receiver, NULL, SUBJ_PRONOUN);
    word(g, "的", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 0);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z7 "王芳给了李伟一个她刚买的苹果，因为他饿了。" */
static void zh_object_relative(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 1);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z8 "王芳为什么给了李伟一个苹果？因为他饿了。" */
static void zh_why(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "为什么", FFN_WORD_FUNCTION);
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "？");
    word(g, "因为", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, cause_role(g), CAUSE_ANY, SUBJ_PRONOUN);
    punct(g, "。");
}

/* Z9 "王芳给了李伟一个苹果，因为他饿了。谁饿了？李伟。" */
static void zh_who(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "，");
    word(g, "因为", FFN_WORD_FUNCTION);
    int role = cause_role(g);
    const cause *c = pick_cause(g, role, sc.obj->cat, CAUSE_ASK);
    person *self = role == FFN_ROLE_GIVER ? &sc.giver : &sc.receiver;
    person *other = role == FFN_ROLE_GIVER ? &sc.receiver : &sc.giver;
    render(g, c->phrase, self, other, &np, SUBJ_PRONOUN);
    punct(g, "。");
    render(g, c->phrase, self, other, &np, SUBJ_ASK);
    punct(g, "？");
    name(g, self);
    punct(g, "。");
}

/* Z10 "王芳告诉李强，她会把苹果送给张伟，因为他饿了。" */
static void zh_told(gen *g) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "告诉", FFN_WORD_VERB);
    name(g, &sc.third);
    punct(g, "，");
    pronoun(g, &sc.giver, 'S');
    word(g, "会", FFN_WORD_FUNCTION);
    if (!zh_kind1(&sc)) {
        word(g, "把", FFN_WORD_FUNCTION);
        np.n = sc.obj;
        np.definite = 1;
        np.noun_word = emit(g, sc.obj->word, FFN_WORD_OBJECT, 0, 0, -1);
        word(g, sc.verb->past, FFN_WORD_VERB);
        name(g, &sc.receiver);
    } else {
        word(g, "给", FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
        word(g, sc.verb->past, FFN_WORD_VERB);
        zh_np(g, &sc, &np, 0);
    }
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z11 "李伟从王芳那里得到了一个苹果，因为他饿了。" */
static void zh_from(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.receiver);
    word(g, "从", FFN_WORD_FUNCTION);
    name(g, &sc.giver);
    word(g, "那里", FFN_WORD_FUNCTION);
    word(g, "得到", FFN_WORD_VERB);
    word(g, "了", FFN_WORD_FUNCTION);
    zh_np(g, &sc, &np, 0);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z12 "苹果被王芳送给了李伟，因为他饿了。" / "苹果是王芳给李伟买的，..." */
static void zh_passive(gen *g) {
    scene sc;
    objnp np = {0};
    new_scene(g, &sc, NEED_ANY);
    np.n = sc.obj;
    np.definite = 1;
    np.noun_word = emit(g, sc.obj->word, FFN_WORD_OBJECT, 0, 0, -1);
    if (!zh_kind1(&sc)) {
        word(g, "被", FFN_WORD_FUNCTION);
        name(g, &sc.giver);
        word(g, sc.verb->past, FFN_WORD_VERB);
        word(g, "了", FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
    } else {
        word(g, "是", FFN_WORD_VERB);
        name(g, &sc.giver);
        word(g, "给", FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
        word(g, sc.verb->past, FFN_WORD_VERB);
        word(g, "的", FFN_WORD_FUNCTION);
    }
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z13 "王芳想送给李伟一个苹果，因为他饿了。" */
static void zh_want(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    word(g, "想", FFN_WORD_VERB);
    if (!zh_kind1(&sc)) {
        word(g, sc.verb->past, FFN_WORD_VERB);
        name(g, &sc.receiver);
    } else {
        word(g, "给", FFN_WORD_FUNCTION);
        name(g, &sc.receiver);
        word(g, sc.verb->past, FFN_WORD_VERB);
    }
    zh_np(g, &sc, &np, 0);
    zh_because(g, &sc, &np);
    punct(g, "。");
}

/* Z14 "王芳给了李伟一个苹果。他饿了。" */
static void zh_two_sentences(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "。");
    say_cause(g, &sc, &np, cause_role(g), CAUSE_ANY, SUBJ_PRONOUN);
    punct(g, "。");
}

/* Z15 "王芳给了李伟一个苹果，因为她的苹果太多了，而且他饿了。" */
static void zh_two_causes(gen *g) {
    scene sc;
    objnp np;
    new_scene(g, &sc, NEED_ANY);
    name(g, &sc.giver);
    zh_give_rest(g, &sc, &np, 0, 0);
    punct(g, "，");
    word(g, "因为", FFN_WORD_FUNCTION);
    int first = cause_role(g);
    say_cause(g, &sc, &np, first, CAUSE_ANY, SUBJ_PRONOUN);
    punct(g, "，");
    word(g, "而且", FFN_WORD_FUNCTION);
    say_cause(g, &sc, &np, first == FFN_ROLE_GIVER ? FFN_ROLE_RECEIVER : FFN_ROLE_GIVER, CAUSE_ANY,
              SUBJ_PRONOUN);
    punct(g, "。");
}

T0(zh_plain) T0(zh_ba) T0(zh_so_giver) T0(zh_then) T0(zh_relative) T0(zh_object_relative)
T0(zh_why) T0(zh_who) T0(zh_told) T0(zh_from) T0(zh_passive) T0(zh_want) T0(zh_two_sentences)
T0(zh_two_causes)

static const template_entry zh_templates[] = {
    {zh_plain_0, 0, 16},         {zh_ba_0, 0, 10},          {zh_state_first, 0, 5},
    {zh_so_giver_0, 0, 4},       {zh_then_0, 0, 5},         {zh_relative_0, 0, 5},
    {zh_object_relative_0, 0, 4}, {zh_why_0, 0, 5},         {zh_who_0, 0, 6},
    {zh_told_0, 0, 4},           {zh_from_0, 0, 5},         {zh_passive_0, 0, 4},
    {zh_want_0, 0, 3},           {zh_two_sentences_0, 0, 4}, {zh_two_causes_0, 0, 4},
    {zh_state_first, 1, 4},
};

/* ---- the public entry points ---------------------------------------------- */

const char *ffn_lang_name(ffn_lang lang) { return lang == FFN_LANG_ZH ? "zh" : "en"; }

ffn_status ffn_lang_parse(const char *s, ffn_lang *out) {
    if (!s || !out) return ffn_error(FFN_ERR_INVALID_ARG, "ffn_lang_parse: NULL argument");
    if (!strcmp(s, "en")) *out = FFN_LANG_EN;
    else if (!strcmp(s, "zh")) *out = FFN_LANG_ZH;
    else return ffn_error(FFN_ERR_CONFIG, "lang: unknown value '%s' (expected en or zh)", s);
    return FFN_OK;
}

const char *ffn_word_class_name(ffn_word_class cls) {
    switch (cls) {
    case FFN_WORD_NAME: return "name";
    case FFN_WORD_PRONOUN: return "pronoun";
    case FFN_WORD_OBJECT: return "object";
    case FFN_WORD_VERB: return "verb";
    case FFN_WORD_FUNCTION: return "function";
    case FFN_WORD_MODIFIER: return "modifier";
    case FFN_WORD_PUNCT: return "punct";
    case FFN_WORD_SPACE: return "space";
    }
    return "?";
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
    if (lang != FFN_LANG_EN && lang != FFN_LANG_ZH)
        return ffn_error(FFN_ERR_INVALID_ARG, "corpus: unknown language %d", (int)lang);
    if (n_sentences < 1 || n_sentences > 10000000)
        return ffn_error(FFN_ERR_CONFIG, "corpus: sentences: expected 1 .. 10000000, got %lld",
                         (long long)n_sentences);
    gen g = {.lang = lang, .line_start = 1, .cap_next = 1};
    ffn_rng_seed(&g.r, seed);
    const template_entry *t = lang == FFN_LANG_EN ? en_templates : zh_templates;
    int64_t nt = lang == FFN_LANG_EN ? COUNT(en_templates) : COUNT(zh_templates);
    int total = 0;
    for (int64_t i = 0; i < nt; i++) total += t[i].weight;
    for (int64_t s = 0; s < n_sentences && !g.err; s++) {
        int r = (int)ffn_rng_below(&g.r, (uint64_t)total);
        int64_t k = 0;
        while (r >= t[k].weight) r -= t[k++].weight;
        t[k].fn(&g, t[k].arg);
        end_line(&g);
    }
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
    if (lang == FFN_LANG_EN) {
        *out = (ffn_corpus_inventory){COUNT(en_female), COUNT(en_male), 0, COUNT(en_nouns),
                                      COUNT(en_verbs), COUNT(en_templates),
                                      COUNT(en_giver_causes), COUNT(en_receiver_causes),
                                      COUNT(en_adjectives)};
    } else if (lang == FFN_LANG_ZH) {
        *out = (ffn_corpus_inventory){COUNT(zh_female), COUNT(zh_male), COUNT(zh_surnames),
                                      COUNT(zh_nouns), COUNT(zh_verbs), COUNT(zh_templates),
                                      COUNT(zh_giver_causes), COUNT(zh_receiver_causes),
                                      COUNT(zh_adjectives)};
    } else {
        return ffn_error(FFN_ERR_INVALID_ARG, "corpus: unknown language %d", (int)lang);
    }
    return FFN_OK;
}
