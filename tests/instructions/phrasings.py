"""Phrasings of instructions that exclude (and that do not), across domains, for judging a splitter.

Two tables, none of whose sentences comes from the dev benchmarks:

* ``POSITIVE`` / ``NEGATIVE``: the independent table (issue 10), written apart from the splitter. Each positive
  :class:`Case` gives the instruction, words that must stay in ``keep``, the excluded aspects as short noun phrases,
  and words of an excluded aspect that must leave ``keep``. A list "not X or Y" is written as one aspect "X or Y"
  (the metric accepts it as one prediction or as two); separate clauses or sentences give separate aspects.
* ``EXCLUDING`` / ``PLAIN``: the table written together with the rules splitter, kept as a regression set.
"""

from typing import NamedTuple


class Case(NamedTuple):
    instruction: str
    keep_contains: tuple[str, ...]
    exclude: tuple[str, ...]
    keep_must_not_contain: tuple[str, ...] = ()


def _c(instruction: str, keep: list[str], exclude: list[str], keep_not: list[str] = ()) -> Case:
    return Case(instruction, tuple(keep), tuple(exclude), tuple(keep_not))


# fmt: off
POSITIVE = [
    # --- predicate last: "X are not relevant / irrelevant / off-topic / outside the scope / does not count"
    _c("Find trials of metformin in type 2 diabetes. Trials in pregnant women are not relevant.",
       ["metformin"], ["pregnant women"], ["pregnant"]),
    _c("Statutes on data retention are wanted; anything on criminal procedure is off-topic.",
       ["data retention"], ["criminal procedure"], ["criminal"]),
    _c("Tutorials on Kubernetes networking. Docker Swarm is irrelevant.", ["Kubernetes"], ["Docker Swarm"], ["Swarm"]),
    _c("Information on index funds for retirement. Cryptocurrencies are outside the scope.",
       ["index funds"], ["Cryptocurrencies"], ["Cryptocurrencies"]),
    _c("Match reports from the 2022 season. Friendlies are not relevant.", ["2022 season"], ["Friendlies"], ["Friendlies"]),
    _c("Organic pest control for tomatoes. Chemical pesticides are out of scope.",
       ["pest control"], ["Chemical pesticides"], ["Chemical"]),
    _c("Exhibitions of impressionist painting in Paris. Sculpture exhibitions are not relevant.",
       ["impressionist"], ["Sculpture exhibitions"], ["Sculpture"]),
    _c("Things to do in Kyoto. Temples are not of interest to me.", ["Kyoto"], ["Temples"], ["Temples"]),
    _c("Lesson plans for teaching fractions. Worksheets are not what we need.", ["fractions"], ["Worksheets"], ["Worksheets"]),
    _c("Scholarships for engineering students; those limited to US citizens are irrelevant.",
       ["Scholarships"], ["US citizens"], ["citizens"]),
    _c("Insurance claims for water damage; hurricane damage does not count.",
       ["water damage"], ["hurricane damage"], ["hurricane"]),
    _c("Open positions for nurses in Dublin. Agency jobs are not wanted.", ["nurses"], ["Agency jobs"], ["Agency"]),
    _c("Housing policy in Berlin. Rent control is outside the scope, as is social housing.",
       ["Housing policy"], ["Rent control", "social housing"], ["Rent", "social"]),
    _c("Maintenance schedules for diesel trucks. Passenger cars are irrelevant, and so are motorcycles.",
       ["diesel trucks"], ["Passenger cars", "motorcycles"], ["Passenger", "motorcycles"]),
    _c("Coverage of the city council budget vote. Editorials are not relevant, nor are letters to the editor.",
       ["budget vote"], ["Editorials", "letters to the editor"], ["Editorials", "letters"]),
    # --- "X should not be retrieved / should be excluded / must be ignored / is to be excluded"
    _c("Soup recipes are relevant. Cream-based soups should not be retrieved.",
       ["Soup recipes"], ["Cream-based soups"], ["Cream"]),
    _c("Anything about the login page should be excluded.", [], ["login page"], ["login"]),
    _c("Analyses of bond yields. Opinion pieces by influencers should be ignored.",
       ["bond yields"], ["Opinion pieces by influencers"], ["influencers"]),
    _c("Measurements of heat transfer in laminar boundary layers. Turbulent flows should be excluded.",
       ["laminar"], ["Turbulent flows"], ["Turbulent"]),
    _c("Budget airlines in Europe; Ryanair should not be considered.", ["Budget airlines"], ["Ryanair"], ["Ryanair"]),
    _c("Product pages for running shoes. Refurbished items should be filtered out.",
       ["running shoes"], ["Refurbished items"], ["Refurbished"]),
    _c("Meta-analyses published before 2015 should be excluded.", [], ["Meta-analyses published before 2015"]),
    _c("Documents on vaccine logistics. Those discussing vaccine efficacy are to be excluded.",
       ["logistics"], ["vaccine efficacy"], ["efficacy"]),
    _c("Machine translation evaluation. Papers on speech translation should not be returned.",
       ["Machine translation"], ["speech translation"], ["speech"]),
    # --- imperatives: ignore / skip / leave out / avoid / exclude / rule out / filter out / disregard
    _c("Case law on wrongful dismissal in Ontario. Ignore decisions from Quebec.",
       ["wrongful dismissal"], ["decisions from Quebec"], ["Quebec"]),
    _c("Weeknight pasta recipes. Skip anything that needs a pressure cooker.", ["pasta"], ["pressure cooker"], ["pressure"]),
    _c("Compare SQL databases for analytics; leave out NoSQL stores.", ["SQL databases"], ["NoSQL stores"], ["NoSQL"]),
    _c("Rule out answers that recommend jQuery.", [], ["jQuery"], ["jQuery"]),
    _c("Find Git branching strategies. Filter out pages about Subversion.", ["Git branching"], ["Subversion"], ["Subversion"]),
    _c("Sources on the Ottoman Empire in the 16th century. Leave out the Crimean War.",
       ["Ottoman"], ["Crimean War"], ["Crimean"]),
    _c("Quantum computing hardware; exclude papers on quantum cryptography",
       ["hardware"], ["quantum cryptography"], ["cryptography"]),
    _c("Search for mechanical keyboards; ignore listings from marketplace resellers",
       ["mechanical keyboards"], ["marketplace resellers"], ["resellers"]),
    _c("Remote hiring practices in tech firms; exclude anything about unpaid internships.",
       ["Remote hiring"], ["unpaid internships"], ["internships"]),
    _c("Historical weather data for Chicago; leave out forecasts.", ["Chicago"], ["forecasts"], ["forecasts"]),
    _c("Filter out the results that are about the Premier League.", [], ["Premier League"], ["Premier"]),
    _c("Find case studies of supply chain disruptions in 2021; ignore the Suez Canal blockage.",
       ["supply chain"], ["Suez Canal blockage"], ["Suez"]),
    _c("Cycling training plans; you can disregard indoor trainer workouts.",
       ["Cycling"], ["indoor trainer workouts"], ["indoor"]),
    _c("Barbecue sauce recipes - avoid anything containing liquid smoke", ["Barbecue sauce"], ["liquid smoke"], ["smoke"]),
    _c("Please exclude sources older than 2010 and sources in German.", [], ["older than 2010", "in German"],
       ["2010", "German"]),
    # --- "please don't return X", "do not include", "don't show"
    _c("Please don't return law firm advertisements.", [], ["law firm advertisements"], ["advertisements"]),
    _c("Do not include anything about pet food recalls in the results.", [], ["pet food recalls"], ["recalls"]),
    _c("Industrial robot arms for welding. Don't show collaborative robots.",
       ["welding"], ["collaborative robots"], ["collaborative"]),
    # --- first person: "I am not interested in X", "I don't want X", "we do not need X"
    _c("I am looking for physiotherapy programmes after hip replacement. I'm not interested in surgical techniques.",
       ["physiotherapy"], ["surgical techniques"], ["surgical"]),
    _c("Latest news on the port strike; I'm not interested in the union leader's personal life.",
       ["port strike"], ["union leader's personal life"], ["personal"]),
    _c("Family hotels in Crete. I don't want all-inclusive resorts.", ["Crete"], ["all-inclusive resorts"], ["resorts"]),
    _c("We do not need anything on payday loans.", [], ["payday loans"], ["payday"]),
    _c("I'd rather not see anything about the royal family.", [], ["royal family"], ["royal"]),
    _c("how to profile memory in python, not interested in C extensions",
       ["profile memory"], ["C extensions"], ["extensions"]),
    # --- "no X", "nothing on X", "not X", "but not X"
    _c("Quarterly earnings of European banks; nothing on US regional banks",
       ["European banks"], ["US regional banks"], ["regional"]),
    _c("Swimming technique articles. Nothing about open-water swimming.",
       ["Swimming technique"], ["open-water swimming"], ["open-water"]),
    _c("Gift ideas for a 10-year-old. No toys with batteries.", ["Gift ideas"], ["toys with batteries"], ["batteries"]),
    _c("No press coverage from tabloids.", [], ["press coverage from tabloids"], ["tabloids"]),
    _c("Nothing on celebrity chefs, please; I want home cooking techniques.",
       ["home cooking"], ["celebrity chefs"], ["celebrity"]),
    _c("Patent disputes over smartphone designs, but not the ones involving Samsung.",
       ["smartphone"], ["Samsung"], ["Samsung"]),
    _c("Tennis coaching drills, but not for doubles play.", ["Tennis"], ["doubles play"], ["doubles"]),
    _c("Election coverage from regional newspapers, not national broadcasters",
       ["regional newspapers"], ["national broadcasters"], ["broadcasters"]),
    _c("Guitar lessons for beginners, but please no music theory.", ["Guitar"], ["music theory"], ["theory"]),
    # --- "not X but Y"
    _c("Not the Roman Republic but the Roman Empire is what I'm after.",
       ["Roman Empire"], ["Roman Republic"], ["Republic"]),
    _c("Not the film but the novel of The Shining, please.", ["novel"], ["film"], ["film"]),
    # --- "anything except / other than / apart from X", "excluding X", "without X"
    _c("Biographies of medieval queens, apart from Eleanor of Aquitaine.",
       ["medieval queens"], ["Eleanor of Aquitaine"], ["Eleanor"]),
    _c("Mortgage advice for first-time buyers, other than shared ownership schemes.",
       ["first-time buyers"], ["shared ownership schemes"], ["ownership"]),
    _c("Gluten-free bread recipes, excluding those with xanthan gum.", ["bread"], ["xanthan gum"], ["xanthan"]),
    _c("Wireless earbuds under 100 dollars, except Apple models", ["earbuds"], ["Apple models"], ["Apple"]),
    _c("Any kind of bread is fine other than rye.", ["bread"], ["rye"], ["rye"]),
    _c("Show me every model of the Volvo XC60 apart from the hybrid ones.", ["Volvo"], ["hybrid"], ["hybrid"]),
    _c("Train routes from Vienna to Venice, without night trains.", ["Vienna"], ["night trains"], ["night"]),
    _c("Healthy lunch ideas for kids without peanut butter.", ["lunch ideas"], ["peanut butter"], ["peanut"]),
    # --- negation first in the sentence / label style
    _c("NBA trade rumours are irrelevant; I want confirmed transfers only.",
       ["confirmed transfers"], ["NBA trade rumours"], ["rumours"]),
    _c("Off limits: anything sponsored by pharmaceutical companies.", [],
       ["sponsored by pharmaceutical companies"], ["pharmaceutical"]),
    _c("Not wanted: job adverts.", [], ["job adverts"], ["adverts"]),
    _c("Irrelevant: studies of fruit flies. Relevant: studies of zebrafish.", ["zebrafish"], ["fruit flies"], ["flies"]),
    # --- lists over two sentences, several exclusions, "X or Y"
    _c("Reports of the earthquake in Chile. Skip live blogs. Also photo galleries.",
       ["earthquake"], ["live blogs", "photo galleries"], ["blogs", "galleries"]),
    _c("Studies on urban heat islands. Rule out anything on rural areas and anything on indoor temperatures.",
       ["urban heat islands"], ["rural areas", "indoor temperatures"], ["rural", "indoor"]),
    _c("Find studies on back pain. Studies of surgery or injections are not relevant.",
       ["back pain"], ["surgery or injections"], ["surgery", "injections"]),
    _c("I don't want recipes with peanuts or tree nuts.", [], ["peanuts or tree nuts"], ["peanuts"]),
    _c("Houseplants for low light; skip cacti and succulents.", ["Houseplants"], ["cacti and succulents"],
       ["cacti", "succulents"]),
    _c("Good coffee shops in Melbourne. No chains. I don't want anything in shopping malls either.",
       ["coffee shops"], ["chains", "shopping malls"], ["chains", "malls"]),
    # --- "only" qualifiers and positive "only" constraints beside an exclusion
    _c("Documents dealing only with animal models are not relevant.", [], ["animal models"], ["animal"]),
    _c("Data on plastic recycling rates in Asia; documents dealing only with Europe should be excluded.",
       ["plastic recycling"], ["Europe"], ["Europe"]),
    _c("Documents focusing only on pricing are not relevant; we want feature comparisons.",
       ["feature comparisons"], ["pricing"], ["pricing"]),
    _c("Only open-source tools are relevant. Commercial software is not relevant.",
       ["open-source"], ["Commercial software"], ["Commercial"]),
    _c("Cognitive behavioural therapy for anxiety. Medication-only treatments should not be retrieved.",
       ["anxiety"], ["Medication-only treatments"], ["Medication"]),
    # --- FollowIR-like narratives
    _c("Relevant documents report side effects of ACE inhibitors; documents that merely mention blood pressure "
       "targets are not relevant.", ["ACE inhibitors"], ["blood pressure targets"], ["targets"]),
    _c("A relevant document must give experimental data on superconductivity; documents that are purely "
       "theoretical are not relevant.", ["superconductivity"], ["theoretical"], ["theoretical"]),
    _c("Papers on shock waves in air. Papers dealing with shock waves in water are off-topic.",
       ["air"], ["shock waves in water"], ["water"]),
    _c("A relevant document describes how a bridge failed and why. Documents that only report the number of "
       "casualties are not relevant.", ["bridge failed"], ["number of casualties"], ["casualties"]),
    _c("To be relevant, a passage must explain a tax policy's effect on small businesses. Passages that merely "
       "mention the policy's name are not relevant.", ["small businesses"], ["policy's name"], ["name"]),
    _c("Relevant documents give measured drag coefficients for airfoils at low speed. Documents concerned with "
       "hypersonic speeds are not relevant.", ["airfoils"], ["hypersonic speeds"], ["hypersonic"]),
    _c("A document is relevant if it reports a clinical outcome of acupuncture; studies of acupuncture in animals "
       "are not relevant.", ["clinical outcome"], ["acupuncture in animals"], ["animals"]),
    _c("Relevant reports describe flood defences in the Netherlands. Reports focusing on coastal tourism are not "
       "relevant.", ["flood defences"], ["coastal tourism"], ["tourism"]),
    _c("A relevant article discusses the economics of electric vehicle batteries; articles about charging "
       "stations are not relevant.", ["batteries"], ["charging stations"], ["charging"]),
    _c("Documents on the causes of World War I; the war's military campaigns are not relevant.",
       ["causes"], ["military campaigns"], ["campaigns"]),
    # --- casual, lower case, no final punctuation
    _c("treatments for eczema in adults, no steroid creams", ["eczema"], ["steroid creams"], ["steroid"]),
    _c("visa requirements for brazil pls no blog posts", ["visa"], ["blog posts"], ["blog"]),
    _c("recipes for banana bread but no walnuts", ["banana bread"], ["walnuts"], ["walnuts"]),
    _c("used bikes for sale in berlin dont show ebikes", ["used bikes"], ["ebikes"], ["ebikes"]),
    _c("linux distros for old laptops, not ubuntu", ["linux"], ["ubuntu"], ["ubuntu"]),
    _c("podcast recommendations about history, nothing true crime", ["podcast"], ["true crime"], ["crime"]),
    _c("good sci-fi novels. not interested in space opera", ["sci-fi"], ["space opera"], ["opera"]),
    _c("cheap phone plans with lots of data, skip prepaid", ["phone plans"], ["prepaid"], ["prepaid"]),
]

# Plain instructions: no exclusion, though many carry a negation. Tricky choices:
# * "no more than / at most" is a bound on what is wanted, stated positively; we keep it whole (no aspect to name).
# * "X need not apply" is read as "X does not have to apply" (a relaxed requirement), as in narratives.
# * a negation inside the topic ("drugs not approved by the FDA", "why the stock did not recover") is what the
#   user wants to find, not something to leave out; so is "No" inside a proper name.
# * "without X ... still relevant" and "do not report X ... still relevant" relax, they do not exclude.
NEGATIVE = [
    "Find clinical guidelines for managing sepsis in adults.",
    "Documents need not describe an operational system; design studies are relevant too.",
    "Not only laboratory experiments but also field studies are relevant.",
    "It does not matter whether the bridge is made of steel or concrete.",
    "Relevant documents do not have to be recent.",
    "Whether or not the company went bankrupt, its restructuring plan is of interest.",
    "The recipe is not necessarily vegetarian.",
    "Nothing else is needed beyond a description of the algorithm.",
    "The origin of the virus is unknown; documents on its spread are relevant.",
    "A notable example is enough to make a passage relevant.",
    "Travel guides for Norway and Sweden.",
    "Nobody has measured this directly, so estimates are relevant.",
    "None of the requirements are strict.",
    "Non-linear models of population growth.",
    "Nonetheless, any study of the treaty is relevant.",
    "Documents in which the cause cannot be determined are still relevant.",
    "No more than five years old is preferred.",
    "The method need not apply to real data; simulations are fine.",
    "Non-profit organisations and charities in Kenya.",
    "Studies without a control group are still relevant.",
    "Any document that mentions the treaty is relevant, even in passing.",
    "Papers that do not report p-values are still relevant.",
    "Not every relevant document will name the drug; descriptions of its effects suffice.",
    "Find out why the stock did not recover after the 2020 crash.",
    "Reasons why vaccines do not cause autism.",
    "Relevant documents discuss the No Child Left Behind Act.",
    "Cheap flights to Oslo with no more than one stop.",
    "Relevant articles explain the difference between viruses and bacteria.",
    "Only studies in humans are relevant.",
    "Things to do in Lisbon that cost nothing.",
    "Court cases where the defendant was not found guilty.",
    "Drugs that are not approved by the FDA for children.",
    "Non-invasive methods for measuring blood glucose.",
    "Relevant passages may or may not mention the author.",
    "Do not worry about the publication date; any era is fine.",
    "Unemployment figures for Norway, unknown causes included.",
    "how do i fix a bike chain that keeps slipping",
    "A relevant review compares at least three vacuum cleaners, not necessarily from the same brand.",
]
# fmt: on

EXCLUDING = [
    # predicate: "X are not relevant / irrelevant / off-topic / out of scope"
    ("Find studies on statin therapy. Studies in children are not relevant.", ["children"], ["statin"]),
    ("Recipes with chickpeas are welcome; recipes that use canned tomatoes are irrelevant.", ["canned tomatoes"], ["chickpeas"]),
    ("Articles about the 1998 World Cup final are off-topic.", ["1998 World Cup final"], []),
    ("Guides to configuring nginx. Apache configuration is outside the scope of this search.", ["Apache configuration"], ["nginx"]),
    ("Court rulings on tenant rights. Commercial leases are out of scope.", ["Commercial leases"], ["tenant"]),
    ("Documents dealing only with freshwater fish are not relevant.", ["freshwater fish"], []),
    ("Passages that merely mention inflation in passing are not relevant.", ["inflation in passing"], []),
    ("papers on graph neural networks. papers about transformers are not relevant", ["transformers"], ["graph neural"]),
    ("Reviews of budget laptops are useful, but gaming laptops are not of interest.", ["gaming laptops"], ["budget laptops"]),
    ("Hotels in Lisbon near the river. Hostels are not what I'm looking for.", ["Hostels"], ["Lisbon"]),
    ("Information on mortgage refinancing. Reverse mortgages are not relevant either.", ["Reverse mortgages"], ["refinancing"]),
    ("Evidence on remote work productivity; opinion columns are irrelevant here.", ["opinion columns"], ["remote work"]),
    ("Sources on the French Revolution. Anything about Napoleon's later campaigns is off topic.", ["Napoleon's later campaigns"], ["French Revolution"]),
    ("Rust tutorials for beginners. Content on unsafe code is not relevant to me.", ["unsafe code"], ["Rust"]),
    # "X should not be retrieved / should be excluded / should be ignored"
    ("Press releases should not be retrieved.", ["Press releases"], []),
    ("Find papers on crop yields in Kenya. Studies on maize should be excluded.", ["maize"], ["Kenya"]),
    ("Marathon training plans. Ultramarathon plans should be ignored.", ["Ultramarathon plans"], ["Marathon"]),
    ("Documents about fraud detection in banking; insurance fraud must be left out.", ["insurance fraud"], ["banking"]),
    ("Listings of used cars; salvage titles should be filtered out.", ["salvage titles"], ["used cars"]),
    # imperatives
    ("Ignore anything about cryptocurrency.", ["cryptocurrency"], []),
    ("Skip reviews older than five years.", ["reviews older than five years"], []),
    ("Leave out articles about celebrity divorces.", ["celebrity divorces"], []),
    ("Avoid sources that discuss homeopathy.", ["homeopathy"], []),
    ("Exclude clinical trials in mice.", ["clinical trials in mice"], []),
    ("Rule out documents on wind power.", ["wind power"], []),
    ("Filter out forum threads about piracy.", ["forum threads about piracy"], []),
    ("Please omit results on the stock market crash of 1929.", ["stock market crash of 1929"], []),
    ("Disregard passages concerning tax evasion.", ["tax evasion"], []),
    ("you can disregard opinion pieces", ["opinion pieces"], []),
    ("Feel free to ignore anything on vintage cameras.", ["vintage cameras"], []),
    ("Drop anything related to sports betting.", ["sports betting"], []),
    ("Leave aside studies of adolescents.", ["adolescents"], []),
    ("Steer clear of sponsored posts.", ["sponsored posts"], []),
    ("Weed out any reviews that were written by the manufacturer.", ["written by the manufacturer"], []),
    # "do not return / don't show"
    ("Please don't return forum posts.", ["forum posts"], []),
    ("Do not include documents about pediatric dosing.", ["pediatric dosing"], []),
    ("don't show me anything about Windows", ["Windows"], []),
    ("Never return pages about gambling.", ["gambling"], []),
    ("Do not retrieve passages that list side effects.", ["side effects"], []),
    # first person
    ("I am not interested in vegan recipes.", ["vegan recipes"], []),
    ("i'm not interested in electric scooters", ["electric scooters"], []),
    ("I don't want sponsored content.", ["sponsored content"], []),
    ("We do not need information about shipping costs.", ["shipping costs"], []),
    ("I do not care about the history of the company.", ["history of the company"], []),
    ("Looking for hiking trails in Norway. I'm not looking for guided tours.", ["guided tours"], ["hiking trails"]),
    ("I have no interest in reality television.", ["reality television"], []),
    # short forms
    ("no celebrity gossip", ["celebrity gossip"], []),
    ("Nothing on the 2008 financial crisis.", ["2008 financial crisis"], []),
    ("No spoilers please.", ["spoilers"], []),
    ("Comparisons of electric kettles, not stovetop models.", ["stovetop models"], ["electric kettles"]),
    ("Budget travel tips for Japan, but not Tokyo.", ["Tokyo"], ["Japan"]),
    ("Treatments for migraine, excluding triptans.", ["triptans"], ["migraine"]),
    ("Tax rules for freelancers except for VAT.", ["VAT"], ["freelancers"]),
    ("Studies of sleep quality other than those on insomnia medication.", ["insomnia medication"], ["sleep quality"]),
    ("Anything about solar panels apart from rooftop installations.", ["rooftop installations"], ["solar panels"]),
    ("Healthy breakfast ideas without eggs.", ["eggs"], ["breakfast"]),
    ("Find news on the election (not opinion polls).", ["opinion polls"], ["election"]),
    ("Research on bee decline, with the exception of pesticide studies.", ["pesticide studies"], ["bee decline"]),
    # predicate first, or exclusion first in the sentence
    ("Not relevant: documents on ancient Rome.", ["ancient Rome"], []),
    ("Excluded: reports published before 2010.", ["reports published before 2010"], []),
    ("Off-topic are documents on pet insurance.", ["pet insurance"], []),
    # lists over two sentences, several exclusions, list items
    ("Skip reviews. Also opinion pieces.", ["reviews", "opinion pieces"], []),
    ("Ignore product announcements. Nor anything on stock prices.", ["product announcements", "stock prices"], []),
    ("Articles on coral reefs. Papers about bleaching are not relevant. Ignore anything on fishing quotas too.", ["bleaching", "fishing quotas"], ["coral reefs"]),
    ("Documents about the Apollo program are relevant. Those about the Space Shuttle, or about the ISS, are not relevant.", ["Space Shuttle", "ISS"], ["Apollo"]),
    ("Good coffee grinders. I don't want blade grinders; manual grinders are also not relevant.", ["blade grinders", "manual grinders"], ["coffee grinders"]),
    # narrative style (FollowIR-like)
    ("A relevant document describes a specific vaccine trial and its outcome. Documents that only discuss vaccine hesitancy are not relevant.", ["vaccine hesitancy"], ["vaccine trial"]),
    ("Relevant documents report measured emissions from diesel engines; documents limited to gasoline engines are not relevant.", ["gasoline engines"], ["diesel"]),
    ("To be relevant a document must name a company that was fined. Documents about fines on individuals are irrelevant.", ["fines on individuals"], ["company"]),
    ("Relevant passages explain how the immune system fights viruses. Passages that give vaccination schedules are not relevant.", ["vaccination schedules"], ["immune system"]),
    ("Only peer-reviewed studies are relevant; blog posts are not relevant.", ["blog posts"], ["peer-reviewed"]),
    ("Only documents on Arctic sea ice are relevant. Documents on Antarctic ice shelves are not relevant.", ["Antarctic ice shelves"], ["Arctic"]),
    # casual, lower case, no final punctuation
    ("looking for cheap flights to rome, no layovers in paris", ["layovers in paris"], ["rome"]),
    ("best pizza dough recipes but skip sourdough", ["sourdough"], ["pizza"]),
    ("python logging tutorials, ignore anything about log4j", ["log4j"], ["logging"]),
    ("startup funding advice - nothing about crowdfunding", ["crowdfunding"], ["funding"]),
    ("dog training tips. not interested in puppy crate training", ["puppy crate training"], ["dog training"]),
    ("jazz history please, leave out smooth jazz", ["smooth jazz"], ["jazz"]),
    ("knee pain exercises, nothing involving weights", ["weights"], ["knee"]),
    ("phones with good cameras. no iphones", ["iphones"], ["cameras"]),
]

PLAIN = [
    # no exclusion at all, including negations that do not exclude
    "Find reviews of hybrid cars from the last two years.",
    "Relevant documents describe the mechanism of action of beta blockers.",
    "Documents need not describe an operational system.",
    "Not only theoretical papers but also experimental ones are relevant.",
    "It does not matter whether the study is recent.",
    "Relevant documents do not have to be in English.",
    "The passage need not mention the author by name.",
    "Results from Norway are welcome.",
    "The article may discuss nonlinear effects.",
    "Nonetheless, documents on both species are relevant.",
    "Whether or not the trial succeeded, any report of it is relevant.",
    "Documents are relevant whether or not they give numerical results.",
    "The recipe does not necessarily have to be vegetarian.",
    "None of the requirements are strict; any related document helps.",
    "Documents that cannot be dated are still relevant.",
    "No matter the format, tutorials and reference pages are both relevant.",
    "A relevant document gives at least one notable example.",
    "Include anything that explains the rules of cricket.",
    "Notes, slides and lecture recordings are all relevant.",
    "The document should be no more than five years old.",
    "Studies with no control group are still relevant.",
    "Relevant documents compare at least two algorithms, not just one.",
    "Nobody expects a complete answer; partial explanations are relevant.",
    "Papers that are not yet peer reviewed are also relevant.",
    "Only documents on Arctic sea ice are relevant.",
    "Only experimental studies are relevant.",
    "Relevant documents describe an unknown species discovered after 2000.",
    "Anything about the history of the Silk Road is relevant.",
    "Find passages that explain why the sky is blue.",
    "Documents must report results on at least one benchmark, not merely propose a method.",
]
