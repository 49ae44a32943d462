// The word list behind generated subdomains (word-word-word): plain, lowercase, inoffensive English words.
// 2,000+ words give 2000^3 = 8e9 names, so collisions are rare and a name cannot be guessed from its neighbours.

// Kept as one block of text rather than an array literal so the list stays easy to read, review and extend.
// Rules for additions: lowercase a-z only, 2-12 letters, nothing that could offend or look like a brand.
const TEXT = `
abacus abbey able absolute academic accent accord acorn acre action active actual adagio adder adept admired
adorable advanced advice aerial affair afloat agate agenda agile airship airy aisle alarm albatross album
alcove alder alert algae alive alley alloy almond alpaca alpha alpine alto amber amigo ample amulet amused
anchor ancient anemone angel angle angular animated anise ankle ant antelope anthem antique antler anvil apex
apple apricot apron apt aqua aqueduct arbor arcade arch arched archer arctic ardent arena aria armada armchair
army aroma aromatic arrow art artful artist artistic ash ashen aspen asset assured aster astral atlas atoll
atom atomic attempt attentive attic auburn august aunt aurora austere author autumn avenue avid avocado awake
award aware axis axle azalea azure
badge badger bagel baker bakery balanced balcony ball ballad balloon balmy bamboo banana band banjo bank
banner bare barge barley barn baron barrel basalt basic basil basin basket bass bastion batch baton bay bayou
bazaar beach beacon beagle beam beaming bean bear beaver bed bee beech beet beetle bell belt bench berry berth
bike binder birch biscuit bishop bison blade blanket blaze blend blissful blithe block bloom blossom blue
blueprint blushing board boat bobcat bold bolt bond bone bonnet bonsai book boot border bottle boulder bouncy
boundless bountiful bounty bow bowed bowl box brain brainy branch brass brassy brave bread breeze breezy brick
bridge brief bright brilliant brim brisk bristly broad bronze brook broom broth brown brush bubble bubbly
bucket buckle bud budget buffalo buffet bugle builder bulb bundle bungalow bunny buoy buoyant burly burrow bus
bush bushy busy butter butterfly buttery button buzzard
cabbage cabin cabinet cable cactus cadet cafe cake calm camel cameo camera camp canal canary candid candle
candy cannon canoe canopy canvas canyon cap capable cape capital capsule captain caravan card cardinal careful
cargo caribou caring carnival carpet carrot cart carton cascade case cashew cast castle casual cat catalog
cattle cave cedar celestial cellar cello cement census central cereal certain chain chair chalet chalk chamber
champion channel chapel chapter charm charming chart cheerful cheery cheetah chef cherry cherub chess chest
chestnut chick chief chili chilly chime chip chipmunk choir chord chorus chosen chrome cider cinema cinnamon
circle circular citadel citizen citrus city civic civil clam clarinet clasp class classic clay clean clear
clever cliff clip cloak clock close closet cloth cloud cloudy clover coach coast coastal coat cobalt cobble
cobra cocoa coconut code coffee cogent coherent coin collar colony color colossal column comb comet comfort
comfy comic comma common compact compass complete composed concert concise condor cone confident conifer
considerate content cook cool copper coral cord cordial core cork corn corner cornet cosmic cosmos cottage
cotton cougar council count country couple course court courteous cousin cove cover cow coyote cozy crab
cradle craft crafty crane crate crater crayon cream creamy creative creek crest crew crib cricket crimson
crisp crocus crow crown crucial crumb crust crystal cub cube cuddly cuff cultured cup cupcake curious curly
current curtain curve curved cushion cushy cutter cyan cycle cypress
dahlia dainty daisy dancer dapper daring dart dash dashing data date dawn dazzling decade decent decisive deck
dedicated deep deer definite deft degree delicate delighted delta den dense dentist dependable depot desert
design desk detail device devoted dew dewy dial diamond diary diesel digit diligent diner dingo dinner dipper
direct discreet disk distinct ditch diver diverse divine dizzy docile dock dollar dolphin domain dome donkey
door dot dough dove draft dragon dragonfly drawer dream dreamy dress drift drill driven driver drop drum
drummer dry dual ducal duck duet duke dune durable dusk dust dusty dutiful dynamic
eager eagle ear early earnest earth earthy easel eastern easy ebony echo eclectic eclipse edge editor eel
effort egg egret elated elbow elder electric elegant element elevator elf elfin elk elm eloquent ember emerald
eminent empire emu enchanted endless energetic energy engaging engine enormous entire entry envoy epic epoch
equal era errand erudite essay essential estate estuary eternal ethical even event evergreen ewe exact exalted
exam example excited exotic expert extra
fable fabled fabric face factor fair faithful falcon family famous fan fancy fang farm farmer fashion fast
faucet fawn fearless feast feather feathery feisty fence fender fennel fern ferret ferry fertile festival
festive few fiber fiddle field fig figure file film filter finch fine finger fire firm first fish fit fjord
flag flake flame flamingo flannel flare flash flashy flask fleece fleet flexible flight flint flock floor
floral flour flower fluent fluffy fluid flute flying foal focal fog folder folk fond font food foot forest
forge fork form formal formula fort fortunate fossil fountain fox fragment fragrant frame frank free freight
fresh friend friendly frigate fringe frog frost frosty frugal fruit fudge fuel full funnel funny furnace fuzzy
gadget galaxy gale gallant galleon gallery game garage garden garland garlic garnet gas gate gauge gazelle
gear gecko gelato gem generous genius gentle genuine geyser ghost giant gift gifted gilded ginger giraffe
glacier glad glade glass glassy glaze gleaming gleeful glen glider glimmer glint globe gloss glossy glove glow
glowing glue gnu goal goat gold golden golf gong good goose gorge gorgeous gourd gown grace graceful gracious
grade grain grand granite grape graph grass grassy grateful gravel gravy great green griddle grill grin gritty
grotto grounded group grove growing guard guest guide guitar gulf gull gum gust
habitat hail hair half halibut hall hammer hammock hamster hand handle handy happy harbor hardy hare
harmonious harmony harp harvest hasty hat haven hawk hazel head health healthy heart hearth hearty heat heath
hedge height helix helm helmet helpful herb hero heroic heron hickory hidden high hill hilly hinge hippo
historic history hive hobby holiday holistic holly home honest honey hood hook hope hopeful horizon horn
hornet horse host hotel hour house hub hull humble hummingbird humor hunter hushed hut hyacinth hybrid hymn
ibex ice icicle icy idea ideal idle igloo iguana image immense immune inch index ink inlet inn inner innocent
input insect inspired intent intern intrepid ionic iris iron island isle item ivory ivy
jackal jacket jade jaguar jam jar jasmine jaunty jay jazzy jeans jelly jester jet jetty jewel jig job jockey
joke jolly journal journey jovial joyful joyous jubilant judge juice juicy jumbo jumper jungle juniper just
kale kayak keen keeper kelp kennel kernel kestrel ketchup kettle key keyboard kid kilt kind kindly kinetic
king kingfisher kingly kiosk kitchen kite kitten kiwi knee knife knight knoll knot known koala
label lace ladder ladle lagoon lake lamb lamp land lane lantern lap larch large lark laser lasso lasting latch
latte lattice laugh launch laurel lava lavender lavish lawful lawn layer leader leaf leafy league lean learned
lecture ledge legacy legal legend legible lemon lemonade lemur length lens leopard lesson letter lettuce level
lever library lichen light likely lilac lily limber lime limit linden line linear linen link lion lip liquid
list liter literate lithe little lively lizard llama loaf lobby lobster local lock locket lodge loft lofty log
logical long loop lord lotus loud lovely loving loyal lucid lucky lumber luminous lunar lunch lush lute lynx
lyric
macaw machine maestro magenta magic magnet magnolia maid mail main majestic major mall mallard mammoth mango
manor mantis map maple marble marigold marina marine marker market marmot maroon marsh marten mask mason
massive mast match matrix mature maze meadow meal medal mellow melodic melody melon member memory menu merry
mesa mesh message metal meteor meter method metro midnight mighty mild mile milk mill mindful miner mink minor
mint minute mirror mist misty mitten mixer moat mobile model modern modest mole molten moment monk monsoon
month moon moose moral morning moss mossy moth motley motor mound mountain mouse muffin mug mule mural museum
music mussel mustang mutual myrtle mystic
nail name napkin narrow narwhal nation native natural navy neat nebula nebular nectar needle neighbor neon
nerve nest nested net nettle network new newt nice nickel nifty night nimble noble nocturnal noise nomad
noodle nook noon normal north northern notable note notebook novel nubby nugget number nurse nut nutmeg
oak oaken oasis oat object obliging observant ocean ocelot octopus odd office oil olive omelet onyx opal open
opera optimal option opulent oracle orange orbit orbital orca orchard orchid order orderly organ organic
origin original oriole ornate osprey otter outer outlet oval oven owl owner ox oyster
pace pacific pack pad paddle page pagoda pail paint painted pair pajamas palace pale palm pan pancake panda
panel panther pantry paper parade parcel park parka parrot part party pass pasta paste patch path patient
patio pattern pause pea peaceful peach peak pear pearl pebble pecan pedal pelican pen pencil penguin penny
peony people pepper peppy perch perfect period periodic perky person pet petal pheasant phone photo piano
picnic pie piece pier pigeon pilot pin pine pink pinnacle pioneer pipe pirate pitch pixel pizza place placid
plain plane planet planetary plank plant plate plateau player playful plaza pleasant plot plover plow plucky
plum plush pocket poem poet poetic point polar pole polished polite pond pony pool poplar poppy popular porch
port portal posh possum post pot potato potent pouch powder power practical prairie precious precise premium
press price primary prime prince print prism pristine private prize profile program project prompt proper
prose proud prudent puffin pulsar pulse puma pump pumpkin puppy pure purple puzzle pylon
quail quaint quarry quarter quartz quasar quay queen query quest question queue quick quiet quill quilt quince
quirky quiz quota
rabbit raccoon rack radar radiant radio radish raft rail rain rainbow rainy raisin rally ramp rampart ranch
range rapid rare rate rational raven ravine ray ready real recipe record reed reef regal region reindeer
relaxed reliable relic remedy remote report resolute rest result rhythm rib ribbon rice rich riddle ridge
right rigid rim ring rink ripe ripple river road robin robust rock rocket rocky rod rolling roof room root
rope rose rosy rotor round route row royal ruby rudder rug rugged rule ruler runner rural rustic rye
sacred saddle safe saffron sage sail salad salmon salt salty sample sand sandal sandy sapling sapphire sardine
satchel satellite satin sauce savanna scale scarab scarf scarlet scene scenic school science scone scooter
score screen script scroll sculpture sea seal season seat second secret secure seed select sensor sequoia
serene series shadow shape share shark sharp sheep sheet shelf shell shelter shiny ship shirt shoe shore
shrimp sierra signal silent silk silken silky silo silver simple sincere singer sink sister size skate sketch
ski skill skirt sky skylark sled sleek sleeve slender slice slide slope sloth smart smile smooth snack snail
snappy snow snowy snug social socket sofa soft soil solar soldier solid solo song sonic sonnet sound soup
source southern space spade spare spark sparkling sparrow speaker special speedy spice spicy spike spire
spirited splendid sponge spoon sport sporty spot spotless spring spruce spry square squash squid squirrel
stable staff stag stage stamp stand staple star stark starling station statue steady steam steel steep stellar
stem step sterling stew stick still stoic stone stony stool stork storm stormy story stove straight strap
straw stream street string strong student studio sturdy style stylish suave subtle sugar suit summit sun
sundae sunny sunrise sunset super supper supreme sure surf swallow swan sweater sweet swift sycamore symbol
syrup system
table tablet tactful tadpole tail tale talent talented tall tambourine tame tangerine tangy tank tape tapir
target task taste tasty taut tavern taxi tea teacher teal team teapot temple tempo tender tent tepid term
terrace terrific test text thankful theory thicket thistle thorough thread thrifty throne thrush thunder
ticket tidal tide tidy tiger tile timber time tin tiny tip tireless titanic title toad toast token tool tooth
topaz topic torch tortoise total toucan tour tower town toy track trade trail train tranquil tray treat tree
trellis trick trim trip trophy tropical trout truck true trumpet trunk trusty tub tuba tubular tulip tundra
tune tuneful tunnel turnip turret turtle tutor twig twilight twin
ultimate umber umbrella unicorn unique unit united universe upbeat update upper upright urban urchin useful
user usual utmost
valiant valid valley van vane vapor vase vast vault vector velvet verdant vernal versed vessel vest viaduct
vibrant video view vigilant village vine viola violet violin viper virtual visible vision visit vital vivid
vocal voice volcano vole volume voyage vulture
waffle wagon waiter wakeful wall wallet walnut walrus wand warbler ward warm watch water wave wavy wax way
wealth wealthy weasel weather web wedge weekly weight welcome western whale wheat wheel whip whisker whistle
whole wick wide widget width wild willing willow wind window windy wine wing winter wintry wire wired wise
wish witty wizard wolf wombat wondrous wood wooden woolly word work world worm worthy wrap wren wrench writer
yacht yak yard yarrow year yellow yew yogurt yolk young youthful yucca
zany zealous zebra zen zenith zephyr zero zesty zinc zinnia zip zippy zonal zone zoo zucchini
`;

/** Every word once, in list order. A test checks the size and the shape of each word. */
export const WORDS: readonly string[] = Object.freeze([...new Set(TEXT.split(/\s+/).filter((w) => w !== ''))]);
