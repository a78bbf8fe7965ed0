// Command temporal-server is the pinned Temporal server (go.mod names its
// version) as siteops runs it: the upstream server, started the way its
// own command starts it, with one addition, siteops' role policy
// (policy.go): default deny, and each client certificate only the calls
// of the role its subject's OU names (admin, worker, ingress, oncall,
// partner). The ingress, the one siteops process that faces the
// internet, holds the ingress role: code run in it could make the relay's
// signals and starts, and nothing else. Without SITEOPS_TEMPORAL_NAMESPACE
// it is the upstream server.
//
// It takes the upstream command's flags that siteops uses:
//
//	temporal-server --root DIR --config config --env cluster [--zone Z] [--allow-no-auth] start --service frontend [--service ...]
//	temporal-server --config DIR/config --env cluster render-config
//	temporal-server validate-dynamic-config FILE ...
//
// Built by `make tools` into .tools/bin/temporal-server and by
// deploy/temporal.Dockerfile into the siteops-temporal image. It is a
// module of its own so that the server's dependencies keep the versions
// the server was released with, apart from siteops' own.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	_ "time/tzdata" // the zone database when the image has none

	"github.com/urfave/cli/v2"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/headers"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/log/tag"
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql" // the store siteops runs Temporal on
	_ "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"     // for a server on a laptop
	"go.temporal.io/server/temporal"
)

func main() {
	if err := app().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "temporal-server:", err)
		os.Exit(1)
	}
}

func app() *cli.App {
	return &cli.App{
		Name:  "temporal-server",
		Usage: "the Temporal server " + headers.ServerVersion + " with siteops' role policy (" + NamespaceEnv + ")",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Aliases: []string{"r"}, Value: ".", Usage: "the directory the configuration directory is in"},
			&cli.StringFlag{Name: "config", Aliases: []string{"c"}, Value: "config", Usage: "the configuration directory, under --root"},
			&cli.StringFlag{Name: "env", Aliases: []string{"e"}, Value: "development", Usage: "the configuration file's name: ENV.yaml"},
			&cli.StringFlag{Name: "zone", Aliases: []string{"az"}, Usage: "the availability zone"},
			&cli.BoolFlag{Name: "allow-no-auth", Usage: "no warning when no authorizer is configured"},
		},
		Commands: []*cli.Command{{
			Name:      "validate-dynamic-config",
			Usage:     "check dynamic configuration files against the server's known keys and types",
			ArgsUsage: "FILE ...",
			Action:    validateDynamicConfig,
		}, {
			Name:  "render-config",
			Usage: "print the configuration --env names, read from --config as a path of its own (not under --root), as upstream's does",
			Action: func(c *cli.Context) error {
				cfg, err := config.Load(config.WithEnv(c.String("env")), config.WithConfigDir(c.String("config")), config.WithZone(c.String("zone")))
				if err != nil {
					return fmt.Errorf("loading the configuration: %w", err)
				}
				fmt.Println(cfg.String())
				return nil
			},
		}, {
			Name:  "start",
			Usage: "start services of the server",
			Flags: []cli.Flag{
				&cli.StringSliceFlag{Name: "service", Aliases: []string{"svc"}, Value: cli.NewStringSlice(temporal.DefaultServices...), Usage: "a service to start (repeat for more)"},
			},
			Before: func(c *cli.Context) error {
				if c.Args().Len() > 0 {
					return fmt.Errorf("start takes no arguments (%q): name services with --service", c.Args().Slice())
				}
				return nil
			},
			Action: start,
		}},
	}
}

// validateDynamicConfig prints each file's errors and warnings, and fails
// when a file has an error.
func validateDynamicConfig(c *cli.Context) error {
	errs := 0
	for _, name := range c.Args().Slice() {
		b, err := os.ReadFile(name) //nolint:gosec // a file the operator names
		if err != nil {
			return err
		}
		r := dynamicconfig.LoadYamlFile(b)
		errs += len(r.Errors)
		fmt.Println(name)
		for _, e := range r.Errors {
			fmt.Println("  error:", e)
		}
		for _, w := range r.Warnings {
			fmt.Println("  warning:", w)
		}
	}
	if errs > 0 {
		return fmt.Errorf("%d errors in all", errs)
	}
	return nil
}

// start runs the services until the process is interrupted.
func start(c *cli.Context) error {
	policy, err := ParsePolicy(os.Getenv)
	if err != nil {
		return err
	}
	cfg, err := config.Load(config.WithEnv(c.String("env")), config.WithConfigDir(filepath.Join(c.String("root"), c.String("config"))), config.WithZone(c.String("zone")))
	if err != nil {
		return fmt.Errorf("loading the configuration: %w", err)
	}
	logger := log.NewZapLogger(log.BuildZapLogger(cfg.Log))
	authorizer, err := authorization.GetAuthorizerFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return fmt.Errorf("global.authorization: %w", err)
	}
	mapper, err := authorization.GetClaimMapperFromConfig(&cfg.Global.Authorization, logger)
	if err != nil {
		return fmt.Errorf("global.authorization: %w", err)
	}
	audience, err := authorization.GetAudienceMapperFromConfig(&cfg.Global.Authorization)
	if err != nil {
		return fmt.Errorf("global.authorization: %w", err)
	}
	switch {
	case policy != nil && !authorization.IsNoopAuthorizer(authorizer):
		return fmt.Errorf("%s turns on siteops' role policy, and global.authorization.authorizer names another (%q): a server has one authorizer; unset one of them", NamespaceEnv, cfg.Global.Authorization.Authorizer)
	case policy != nil:
		authorizer, mapper = policy.Wrap(logger)
		logger.Info("Role policy: "+policy.String()+".", tag.NewStringTag("setting", NamespaceEnv))
	case authorization.IsNoopAuthorizer(authorizer) && !c.Bool("allow-no-auth"):
		logger.Warn("No authorizer: every caller the frontend admits may make every call. Set " + NamespaceEnv + " (siteops' role policy) or global.authorization, or pass --allow-no-auth.")
	}
	s, err := temporal.NewServer(
		temporal.ForServices(c.StringSlice("service")),
		// The server reads cfg.DynamicConfigClient's file itself (with
		// metrics), as upstream's command has it since 1.31.
		temporal.WithConfig(cfg),
		temporal.WithLogger(logger),
		temporal.InterruptOn(temporal.InterruptCh()),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return mapper }),
		temporal.WithAudienceGetter(func(*config.Config) authorization.JWTAudienceMapper { return audience }),
	)
	if err != nil {
		return fmt.Errorf("creating the server: %w", err)
	}
	return s.Start()
}
